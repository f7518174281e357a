// The HTTP service end to end on a real socket and a real SQLite queue, as a
// keep-alive client (OpenAI's SDKs) sees it: a request turned away (no key,
// no route, too large) has its body drained, so the next request on the same
// connection is answered as itself; routed bodies (forms, path ids) arrive whole.
#include <doctest/doctest.h>

#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/http/server.h"
#include "daemon/lib/config.h"
#include "tests/unit/jobs/temp_dir.h"

namespace {

constexpr const char* kKey = "server-test-key-0123456789abcdef";

struct Service {
  ns::test::TempDir dir;
  std::unique_ptr<ns::http::HttpService> http;

  Service() {
    std::ofstream(dir.file("keys")) << kKey << "\n";
    const ns::daemon::Config config = ns::daemon::parse_config(
        "database: q.db\nmodels:\n  tiny: absent.gguf\nhttp:\n  listen: 127.0.0.1:0\n  keys_file: keys\n"
        "  max_file_bytes: 4096\n",
        dir.file("config.yaml"));
    http = std::make_unique<ns::http::HttpService>(config, config.database, ns::jobs::SqliteOptions{});
  }
  // One client, one connection kept alive across its calls.
  httplib::Client client(const std::string& key) const {
    httplib::Client c("127.0.0.1", http->port());
    c.set_keep_alive(true);
    c.set_read_timeout(60, 0);
    if (!key.empty()) c.set_bearer_token_auth(key.c_str());
    return c;
  }
};

std::string line(const std::string& id) {
  return R"({"custom_id":")" + id +
         R"(","method":"POST","url":"/v1/chat/completions","body":{"model":"tiny","messages":[{"role":"user","content":"hi"}]}})"
         "\n";
}
const std::string kLine = line("a");

httplib::MultipartFormDataItems upload_form(const std::string& content) {
  return {{"purpose", "batch", "", ""}, {"file", content, "in.jsonl", "application/jsonl"}};
}

// The status, after checking the reply is an OpenAI error object when it is one.
int status_of(const httplib::Result& r) {
  REQUIRE_MESSAGE(r, "no reply: " << httplib::to_string(r.error()));
  if (r->status >= 400) {
    const auto j = nlohmann::json::parse(r->body);
    CHECK_MESSAGE(j.at("error").at("message").get<std::string>().size() > 10, r->body);
  }
  return r->status;
}

}  // namespace

TEST_CASE("http: a request turned away does not leave its body on a kept-alive connection") {
  Service s;
  httplib::Client wrong = s.client("wrong-key-0123456789abcdef");
  httplib::Client right = s.client(kKey);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    CHECK(status_of(wrong.Post("/v1/files", upload_form(kLine))) == 401);
    CHECK(status_of(wrong.Post("/v1/batches", R"({"input_file_id":"file-x"})", "application/json")) == 401);
    CHECK(status_of(wrong.Get("/v1/files")) == 401);  // the same connection: answered as itself

    CHECK(status_of(right.Post("/v1/nowhere", std::string(3000, 'x'), "text/plain")) == 404);
    const httplib::Result list = right.Get("/v1/files");
    CHECK(status_of(list) == 200);
    CHECK(nlohmann::json::parse(list->body).at("object") == "list");
  }
}

TEST_CASE("http: a body over http.max_file_bytes gets 413 and the connection goes on") {
  Service s;
  httplib::Client c = s.client(kKey);
  const httplib::Result big = c.Post("/v1/files", upload_form(std::string(2u << 20, 'x')));
  CHECK(status_of(big) == 413);
  CHECK(big->body.find("max_file_bytes") != std::string::npos);
  CHECK(status_of(c.Get("/v1/files")) == 200);
}

TEST_CASE("http: routed bodies and path ids arrive whole (upload, get, delete, cancel)") {
  Service s;
  httplib::Client c = s.client(kKey);
  const httplib::Result up = c.Post("/v1/files", upload_form(kLine + line("b")));
  REQUIRE_MESSAGE(status_of(up) == 200, up->body);
  const auto file = nlohmann::json::parse(up->body);
  const std::string id = file.at("id");
  CHECK(file.at("bytes") == kLine.size() + line("b").size());
  CHECK(file.at("filename") == "in.jsonl");

  const httplib::Result content = c.Get(("/v1/files/" + id + "/content").c_str());
  REQUIRE(status_of(content) == 200);
  CHECK(content->body == kLine + line("b"));

  // A form field other than file and purpose is named (the form was parsed, not dropped).
  httplib::MultipartFormDataItems extra = upload_form(kLine);
  extra.push_back({"colour", "blue", "", ""});
  const httplib::Result bad = c.Post("/v1/files", extra);
  CHECK(status_of(bad) == 400);
  CHECK(bad->body.find("colour") != std::string::npos);

  CHECK(status_of(c.Post("/v1/batches/batch_nothere/cancel", "", "application/json")) == 404);
  CHECK(status_of(c.Delete(("/v1/files/" + id).c_str())) == 200);
  CHECK(status_of(c.Get(("/v1/files/" + id).c_str())) == 404);
  CHECK(status_of(c.Delete(("/v1/files/" + id).c_str())) == 404);
}
