# `cmake --install build [--prefix P]` (default prefix /usr/local): the layout
# the shipped systemd units name, so they run as installed:
#   P/bin/nightshift, P/bin/nightshiftd
#   P/lib/nightshift/nightly-submit                 (nightshift-nightly.service's script)
#   P/lib/systemd/system/*.service, *.timer         (systemd reads /usr/local/lib/systemd/system)
#   P/share/doc/nightshift/*.md, config.yaml, ...  (the units' Documentation=)
#   P/share/bash-completion/completions/nightshift, nightshiftd
# The units name /usr/local/...; another prefix is written into them at
# install time (--prefix given to `cmake --install` counts), so installed units
# always name installed files. tests/integration/install.sh installs into a
# DESTDIR and checks every path the units name exists there.
include(GNUInstallDirs)

install(TARGETS nightshift nightshiftd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${CMAKE_SOURCE_DIR}/systemd/nightly-submit.sh DESTINATION lib/nightshift RENAME nightly-submit)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/examples/config.yaml
              ${CMAKE_SOURCE_DIR}/examples/nightly-continuation/nightly.env
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")

file(GLOB NS_UNITS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/systemd/*.service ${CMAKE_SOURCE_DIR}/systemd/*.timer)
set(NS_UNIT_STAGE ${CMAKE_BINARY_DIR}/install-stage)
# At install time: the units with the prefix they are installed under, and the
# completion scripts the installed binaries generate from their option tables.
install(CODE "
  set(stage \"${NS_UNIT_STAGE}\")
  file(REMOVE_RECURSE \"\${stage}\")
  file(MAKE_DIRECTORY \"\${stage}/units\" \"\${stage}/completions\")
  foreach(unit ${NS_UNITS})
    get_filename_component(name \"\${unit}\" NAME)
    file(READ \"\${unit}\" text)
    string(REPLACE \"/usr/local/\" \"\${CMAKE_INSTALL_PREFIX}/\" text \"\${text}\")
    file(WRITE \"\${stage}/units/\${name}\" \"\${text}\")
  endforeach()
  execute_process(COMMAND \"$<TARGET_FILE:nightshift>\" completion bash
                  OUTPUT_FILE \"\${stage}/completions/nightshift\" COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND \"$<TARGET_FILE:nightshiftd>\" --bash-completion
                  OUTPUT_FILE \"\${stage}/completions/nightshiftd\" COMMAND_ERROR_IS_FATAL ANY)
")
install(DIRECTORY ${NS_UNIT_STAGE}/units/ DESTINATION lib/systemd/system)
install(DIRECTORY ${NS_UNIT_STAGE}/completions/ DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
