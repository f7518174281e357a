// What a queue call threw, for tests of the database's error classification.
#pragma once

#include <doctest/doctest.h>

#include "jobs/queue.h"

namespace ns::test {

// What `f` threw, or fails the test if nothing was thrown.
template <class F>
ns::jobs::DatabaseError database_error_from(F&& f) {
  try {
    f();
  } catch (const ns::jobs::DatabaseError& e) {
    return e;
  }
  FAIL("no DatabaseError was thrown");
  return ns::jobs::DatabaseError(false, "");
}

}  // namespace ns::test
