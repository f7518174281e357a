# ns_glob_sources(VAR dir...): the .cpp files of a module; cmake/empty.cpp while it has none,
# so the tree configures while modules are being written.
function(ns_glob_sources var)
  set(globs)
  foreach(d ${ARGN})
    list(APPEND globs ${d}/*.cpp)
  endforeach()
  file(GLOB srcs CONFIGURE_DEPENDS ${globs})
  if(NOT srcs)
    set(srcs ${CMAKE_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  set(${var} ${srcs} PARENT_SCOPE)
endfunction()
