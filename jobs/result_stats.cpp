#include "jobs/result_stats.h"

namespace ns::jobs {

std::string result_stat_columns(const char* prefix) {
  std::string out;
  for (const ResultStat& s : kResultStats) out += (out.empty() ? "" : ", ") + std::string(prefix) + s.name;
  return out;
}

void copy_engine_stats(const GenerationStats& from, JobResult& r) {
  for (const ResultStat& s : kResultStats) {
    if (s.engine_real != nullptr) r.*s.real = from.*s.engine_real;
    if (s.engine_bytes != nullptr) r.*s.bytes = from.*s.engine_bytes;
  }
}

}  // namespace ns::jobs
