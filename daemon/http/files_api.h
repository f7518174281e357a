// The Files API: POST /v1/files (multipart: file, purpose=batch), GET
// /v1/files, GET /v1/files/{id}, GET /v1/files/{id}/content, DELETE
// /v1/files/{id}. Files live in the queue's database (jobs/api_store.h);
// nothing of a request names a path on disk.
//
// Contract: an upload is refused (400, nothing stored) unless every line is
// a valid OpenAI Batch request as `nightshift submit --jsonl` reads it
// (cli::parse_batch_jsonl) naming a model, the file holds 1..http.max_lines
// requests and at most http.max_file_bytes (413 above); the message names
// the bad lines by number. A batch's output and error files are listed and
// served like uploads (purpose batch_output).
#pragma once

#include <httplib.h>

#include "daemon/http/session.h"

namespace ns::http {

Reply upload_file(Session& s, const httplib::Request& req);
Reply list_files(Session& s, const httplib::Request& req);
Reply get_file(Session& s, const httplib::Request& req);          // matches[1]: the id
Reply get_file_content(Session& s, const httplib::Request& req);  // matches[1]: the id
Reply delete_file(Session& s, const httplib::Request& req);       // matches[1]: the id

// A limit query parameter: absent = `fallback`, else an integer in 1..max (400 otherwise).
int32_t limit_param(const httplib::Request& req, int32_t fallback, int32_t max);

}  // namespace ns::http
