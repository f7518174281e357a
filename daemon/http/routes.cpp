#include "daemon/http/routes.h"

#include "daemon/http/batches_api.h"
#include "daemon/http/files_api.h"
#include "daemon/http/status_routes.h"

namespace ns::http {

// Ids are letters, digits, '-' and '_' only: anything else is no route (404).
#define NS_ID "([A-Za-z0-9_-]{1,64})"

const std::vector<Route>& routes() {
  static const std::vector<Route> kRoutes = {
      {"POST", "/v1/files", Access::key, upload_file},
      {"GET", "/v1/files", Access::key, list_files},
      {"GET", "/v1/files/" NS_ID, Access::key, get_file},
      {"GET", "/v1/files/" NS_ID "/content", Access::key, get_file_content},
      {"DELETE", "/v1/files/" NS_ID, Access::key, delete_file},
      {"POST", "/v1/batches", Access::key, create_batch},
      {"GET", "/v1/batches", Access::key, list_batches},
      {"GET", "/v1/batches/" NS_ID, Access::key, get_batch},
      {"POST", "/v1/batches/" NS_ID "/cancel", Access::key, cancel_batch},
      // The operator's pages: keyed like the API, for they name batches, models and failures.
      {"GET", "/", Access::key, status_page},
      {"GET", "/metrics", Access::key, metrics_page},
  };
  return kRoutes;
}

#undef NS_ID

}  // namespace ns::http
