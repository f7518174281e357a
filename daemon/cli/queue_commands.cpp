// nightshift submit / list / show / cancel / retry: the queue half of the CLI.
//
// Each command finds its database the same way the daemon does
// (daemon/lib/database_path.h): --db PATH, else `database:` of --config FILE,
// else $NIGHTSHIFT_DB, else ./nightshift.db. Errors print one line on stderr
// and set an exit code from daemon/cli/commands.h (command_support.h).
// `submit --jsonl` and `submit --dir` are jsonl_submit.h and document_submit.h.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "daemon/cli/command_support.h"
#include "daemon/cli/commands.h"
#include "daemon/cli/document_submit.h"
#include "daemon/cli/jsonl_submit.h"
#include "daemon/cli/model_check.h"
#include "daemon/cli/sampling_flags.h"
#include "daemon/cli/status_view.h"
#include "daemon/lib/job_format.h"
#include "common/error.h"
#include "jobs/queue.h"

namespace ns::cli {
namespace {

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string read_prompt(const std::string& positional, const std::string& file) {
  if (!file.empty() && file != "-") {
    std::ifstream in(file, std::ios::binary);
    if (!in)
      throw CommandError{missing_file_code(errno), "cannot read prompt file " + file + ": " + std::strerror(errno)};
    return read_all(in);
  }
  if (file == "-" || positional == "-") return read_all(std::cin);
  return positional;
}

// ---- submit -----------------------------------------------------------------

// Keys that named other content (see add_submit): one line each, exit 4.
void refuse_conflicts(const std::vector<std::string>& conflicts) {
  if (conflicts.empty()) return;
  std::string message = conflicts.front();
  for (size_t i = 1; i < conflicts.size(); ++i) message += "\nnightshift submit: " + conflicts[i];
  throw CommandError{kInvalidInput, message};
}

// One job per non-empty line of `text` (a trailing \r is dropped), all with
// the flags of `base`; with a key, line N gets "KEY:N".
std::vector<jobs::JobSpec> specs_from_lines(const std::string& text, const jobs::JobSpec& base,
                                            std::vector<int>& line_numbers) {
  std::vector<jobs::JobSpec> specs;
  size_t start = 0;
  for (int line = 1; start <= text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string prompt = text.substr(start, end - start);
    if (!prompt.empty() && prompt.back() == '\r') prompt.pop_back();
    start = end + 1;
    if (prompt.empty()) continue;
    jobs::JobSpec s = base;
    s.prompt = std::move(prompt);
    if (!base.idempotency_key.empty()) s.idempotency_key = base.idempotency_key + ":" + std::to_string(line);
    if (std::string problem = jobs::spec_problem(s); !problem.empty()) {
      throw CommandError{kInvalidInput, "line " + std::to_string(line) + ": " + problem + "; nothing was queued"};
    }
    specs.push_back(std::move(s));
    line_numbers.push_back(line);
  }
  return specs;
}

struct SubmitArgs {
  DatabaseArgs db;
  std::string prompt, prompt_file, prompt_lines, jsonl, dir, batch;
  std::vector<std::string> globs;
  jobs::JobSpec spec;
  GrammarFlags grammar;
  bool json = false;
  bool follow_symlinks = false;
  bool prompt_given = false;  // the positional was on the command line (possibly "")
  bool any_model = false;     // --any-model: no check of the model against --config
};

// The model of a job submitted with one spec (a prompt, lines, a folder), checked once.
void check_model(const SubmitArgs& a, const jobs::JobSpec& spec) {
  ModelCheck check = model_check_for(a.db, a.any_model);
  if (std::string problem = check.problem(spec); !problem.empty()) throw CommandError{kInvalidInput, problem};
}
void check_model(const SubmitArgs& a) { check_model(a, a.spec); }

// What a resubmission found, by the state its jobs are in now: "already
// queued" was said of done and failed jobs (#31). " (2 done, 1 failed)", or "".
std::string found_states(const std::map<std::string, int64_t>& found) {
  std::string states;
  for (const char* state : {"queued", "running", "held", "done", "failed", "dead", "cancelled"}) {
    if (const auto it = found.find(state); it != found.end()) {
      states += (states.empty() ? " (" : ", ") + std::to_string(it->second) + " " + state;
    }
  }
  return states.empty() ? states : states + ")";
}

// The command that runs what a resubmission found but will not run again.
void print_found_hints(const std::string& batch, const std::map<std::string, int64_t>& found) {
  const auto count = [&](const char* state) {
    const auto it = found.find(state);
    return it == found.end() ? int64_t{0} : it->second;
  };
  if (count("held") > 0) {
    std::cout << "held: " << count("held") << " jobs wait for a model the daemon cannot serve (nightshift status "
              << "says why); to run them on another model: nightshift retry --batch " << batch << " --model NAME\n";
  }
  if (const int64_t ended = count("failed") + count("dead") + count("cancelled"); ended > 0) {
    std::cout << "not run again: " << ended << " failed, dead or cancelled jobs; to queue them again: nightshift "
              << "retry --batch " << batch << " (--model NAME to change their model)\n";
  }
}

// submit --jsonl FILE: every valid line queued, every invalid one reported.
void submit_jsonl_file(const SubmitArgs& a, int& exit_code) {
  if (!a.spec.idempotency_key.empty()) {
    throw CommandError{kUsage,
                       "--key does not go with --jsonl: each line's key is made from the batch, its custom_id "
                       "and its content"};
  }
  if (a.jsonl == "-" && a.batch.empty()) throw CommandError{kUsage, "reading the JSONL from stdin needs --batch NAME"};
  JsonlSubmitOptions options;
  options.batch = a.batch.empty() ? batch_name_from_path(a.jsonl) : a.batch;
  if (a.jsonl != "-") {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(a.jsonl, ec);
    options.source_path = ec ? a.jsonl : absolute.lexically_normal().string();
  }
  options.model = a.spec.model;
  options.defaults = a.spec.sampling;
  options.priority = a.spec.priority;
  options.max_attempts = a.spec.max_attempts;
  auto check = std::make_shared<ModelCheck>(model_check_for(a.db, a.any_model));
  options.check = [check](const jobs::JobSpec& spec) { return check->problem(spec); };
  const std::string text = read_file_or_stdin(a.jsonl, "the JSONL file");
  auto queue = open_queue(a.db);
  const JsonlSubmitReport report = submit_jsonl(*queue, text, options);
  for (const std::string& line : describe_once(report.rejected)) {
    std::fprintf(stderr, "nightshift submit: %s\n", printable(line).c_str());
  }
  const int64_t created = report.created();
  const int64_t already = static_cast<int64_t>(report.submitted.size()) - created;
  const int64_t rejected = static_cast<int64_t>(report.rejected.size());
  // What a resubmission found, by the state its jobs are in now (#31: "already queued" was said of done jobs).
  std::map<std::string, int64_t> found;
  for (const JsonlSubmitted& s : report.submitted) {
    if (!s.created) ++found[s.state];
  }
  if (a.json) {
    nlohmann::json jobs = nlohmann::json::array(), errors = nlohmann::json::array();
    for (const JsonlSubmitted& s : report.submitted) {
      jobs.push_back(
          {{"line", s.line}, {"custom_id", s.custom_id}, {"id", s.id}, {"created", s.created}, {"state", s.state}});
    }
    for (const BatchLineError& e : report.rejected) {
      errors.push_back({{"line", e.line}, {"custom_id", e.custom_id}, {"message", e.message}});
    }
    std::cout << daemon::json_text({{"batch", options.batch},
                                    {"lines", report.lines},
                                    {"new_jobs", created},
                                    {"already_queued", already},
                                    {"already", found},
                                    {"invalid", rejected},
                                    {"jobs", jobs},
                                    {"errors", errors}})
              << "\n";
  } else {
    std::cout << "batch " << options.batch << ": " << report.lines << " lines, " << created << " new jobs, " << already
              << " already in the batch" << found_states(found) << ", " << rejected << " invalid\n";
    const std::string& b = options.batch;
    print_found_hints(b, found);
    if (created + already > 0) {
      std::cout << "next: nightshift watch --batch " << b << " --until-done; nightshift export --batch " << b
                << " --jsonl results.jsonl\n";
    }
  }
  if (report.lines == 0) throw CommandError{kInvalidInput, a.jsonl + " has no request line"};
  if (rejected > 0) exit_code = kInvalidInput;
}

// submit --dir DOCS: one job per document, each queued once per content.
void submit_document_dir(const SubmitArgs& a, int& exit_code) {
  if (!a.spec.idempotency_key.empty()) {
    throw CommandError{kUsage,
                       "--key does not go with --dir: each document's key is made from the batch, its path "
                       "and its content"};
  }
  const std::vector<std::string>& globs = a.globs.empty() ? kDefaultDocumentGlobs : a.globs;
  std::vector<std::string> links;
  // errno's words, and the exit-code table: 3 for a folder that is not there, 4 for a file.
  struct stat st {};
  if (::stat(a.dir.c_str(), &st) != 0) {
    throw CommandError{missing_file_code(errno), "the folder of documents " + a.dir + ": " + std::strerror(errno)};
  }
  if (!S_ISDIR(st.st_mode)) {
    throw CommandError{kInvalidInput, "the folder of documents " + a.dir + ": " + std::strerror(ENOTDIR) +
                                          " (--dir takes a folder; --jsonl or --prompt-file take a file)"};
  }
  const std::vector<Document> docs = find_documents(a.dir, globs, a.follow_symlinks, &links);
  for (const std::string& link : links) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::read_symlink(std::filesystem::path(a.dir) / link, ec);
    std::fprintf(stderr,
                 "nightshift submit: warning: %s/%s is a symbolic link%s; skipped (--follow-symlinks queues "
                 "what links point to)\n",
                 printable(a.dir).c_str(), printable(link).c_str(),
                 ec ? "" : printable(" to " + target.string()).c_str());
  }
  const std::string batch = a.batch.empty() ? batch_name_from_dir(a.dir) : a.batch;
  std::string glob_list;
  for (const std::string& g : globs) glob_list += (glob_list.empty() ? "" : " ") + g;
  if (docs.empty()) {
    std::fprintf(stderr, "nightshift submit: no document in %s matches %s; nothing to queue\n", a.dir.c_str(),
                 glob_list.c_str());
  }
  jobs::JobSpec document = a.spec;
  document.source_path = a.dir;  // checked as a document job: a max_tokens that leaves it no room is refused
  check_model(a, document);
  auto queue = open_queue(a.db);
  const DocumentSubmitReport report = submit_documents(*queue, docs, a.spec, batch);
  // An empty document (a note just created) is a warning: the nightly unit would otherwise fail every night
  // until someone writes in it (#31); it is queued once it has text.
  int64_t refused = 0;
  for (const DocumentOutcome& d : report.documents) {
    if (d.empty) {
      std::fprintf(stderr, "nightshift submit: warning: %s/%s not queued: it is empty (queued once it has text)\n",
                   printable(a.dir).c_str(), printable(d.relative_path).c_str());
    } else if (!d.problem.empty()) {
      ++refused;
      std::fprintf(stderr, "nightshift submit: %s/%s not queued: %s\n", printable(a.dir).c_str(),
                   printable(d.relative_path).c_str(), printable(d.problem).c_str());
    }
  }
  std::map<int64_t, std::string> state_of;  // of the documents' jobs an earlier run queued
  std::map<std::string, int64_t> found;
  if (report.already() > 0) {
    jobs::ListFilter filter;
    filter.batch = batch;
    filter.limit = 0;
    for (const jobs::Job& job : queue->list(filter)) {
      state_of[job.id] = jobs::is_held(job) ? "held" : jobs::state_name(job.state);
    }
    for (const DocumentOutcome& d : report.documents) {
      if (d.id != 0 && !d.created) ++found[state_of[d.id]];
    }
  }
  if (a.json) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const DocumentOutcome& d : report.documents) {
      nlohmann::json o = {{"path", d.relative_path},
                          {"id", d.id == 0 ? nlohmann::json() : nlohmann::json(d.id)},
                          {"created", d.created}};
      if (d.id != 0) o["state"] = d.created ? std::string("queued") : state_of[d.id];
      if (!d.problem.empty()) o["problem"] = d.problem;
      jobs.push_back(std::move(o));
    }
    std::cout << daemon::json_text({{"batch", batch},
                                    {"documents", report.documents.size()},
                                    {"new_jobs", report.created()},
                                    {"already_queued", report.already()},
                                    {"already", found},
                                    {"not_queued", report.rejected()},
                                    {"jobs", jobs}})
              << "\n";
  } else {
    for (const DocumentOutcome& d : report.documents) {
      if (d.created) std::cout << "queued " << d.relative_path << " as job " << d.id << "\n";
    }
    std::cout << "batch " << batch << ": " << report.documents.size() << " documents in " << a.dir << ", "
              << report.created() << " new jobs, " << report.already() << " already in the batch" << found_states(found)
              << ", " << report.rejected() << " not queued\n";
    print_found_hints(batch, found);
  }
  if (refused > 0) exit_code = kInvalidInput;
}

void add_submit(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<SubmitArgs>();
  CLI::App* cmd = app.add_subcommand("submit",
                                     "Queue generation jobs: one prompt, a file of prompts, an OpenAI Batch "
                                     "JSONL file, or a folder of documents");
  auto* positional = cmd->add_option("prompt", a->prompt, "prompt text, or - to read it from stdin");
  auto* file = cmd->add_option("--prompt-file", a->prompt_file, "read the prompt from a file (- = stdin)");
  auto* lines = cmd->add_option("--prompt-lines", a->prompt_lines,
                                "queue one job per non-empty line of this file (- = stdin), in transactions of "
                                "200; prints one id per line");
  auto* jsonl = cmd->add_option("--jsonl", a->jsonl,
                                "queue one job per line of an OpenAI Batch input file (- = stdin): /v1/completions "
                                "and /v1/chat/completions requests, as a named batch (docs/batch-jsonl.md)");
  auto* dir = cmd->add_option("--dir", a->dir,
                              "queue one continuation job per document (.md/.txt, at any depth) in this folder, "
                              "once per content (docs/nightly-continuation.md)");
  auto* glob = cmd->add_option("--glob", a->globs,
                               "with --dir: which files are documents (repeatable; default '*.md' and '*.txt'; a "
                               "glob with a / matches the path under the folder)")
                   ->allow_extra_args(false);
  auto* batch = cmd->add_option("--batch", a->batch,
                                "with --jsonl or --dir: the batch's name (default: the file's name without "
                                "extension, or the folder's name)");
  glob->needs(dir);
  cmd->add_flag("--any-model", a->any_model,
                "queue the jobs whatever the models: of --config say (for a daemon with another config); by "
                "default a model name --config does not list, or chat jobs for a model without a chat template, "
                "are refused (exit 4)");
  cmd->add_flag("--follow-symlinks", a->follow_symlinks,
                "with --dir: queue what symbolic links point to, even outside the folder (default: links are "
                "skipped with a warning naming them)")
      ->needs(dir);
  batch->excludes(positional);
  batch->excludes(file);
  batch->excludes(lines);
  CLI::Option* inputs[] = {positional, file, lines, jsonl, dir};
  for (CLI::Option* x : inputs) {
    for (CLI::Option* y : inputs) {
      if (x != y) x->excludes(y);
    }
  }
  cmd->add_option("--model", a->spec.model,
                  "model name from the daemon config's models: (required, except with --jsonl whose lines name "
                  "body.model; given with --jsonl it runs every line)");
  add_sampling_flags(cmd, a->spec.sampling);
  add_grammar_flags(cmd, a->grammar);
  // One value per --stop, so `--stop X 'the prompt'` leaves the prompt positional.
  cmd->get_option("--stop")->allow_extra_args(false);
  cmd->add_option("--priority", a->spec.priority, "higher runs first; ties run oldest first")->capture_default_str();
  cmd->add_option("--key", a->spec.idempotency_key,
                  "idempotency key: submitting the same request with the same key again returns the first "
                  "job's id; the key with other content is refused (exit 4) "
                  "(with --prompt-lines, line N gets KEY:N; --jsonl and --dir make their own)");
  cmd->add_option("--max-attempts", a->spec.max_attempts,
                  "attempts that may end in a crash or a transient failure before the job is dead (1..100)")
      ->capture_default_str();
  cmd->add_flag("--json", a->json,
                "print {\"id\": N, \"created\": true|false} (one per line with --prompt-lines; one report object "
                "with --jsonl and --dir)");
  add_database_options(cmd, a->db);
  cmd->footer(
      "With --jsonl and --dir the sampling flags are defaults: a JSONL line's body fields win.\n"
      "Examples:\n"
      "  nightshift submit --model tiny 'Once upon a time'\n"
      "  nightshift submit --model tiny --prompt-file notes.txt --max-tokens 400 --stop $'\\n\\n' --key notes-2025-01-31\n"
      "  cat doc.txt | nightshift submit --model tiny --priority 5 -\n"
      "  nightshift submit --model tiny --prompt-lines questions.txt --key questions-v1\n"
      "  nightshift submit --jsonl requests.jsonl --batch reviews-0412 --model k2\n"
      "  nightshift submit --dir ~/notes --glob '*.md' --model k2 --max-tokens 800\n"
      "Submitting the same JSONL file or folder again queues only what is new or changed.\n"
      "Exit status: 0 queued (or already in the batch), 2 bad command line, 3 a file or folder that is not\n"
      "there, 4 input rejected (empty or non-UTF-8 prompt, sampling value out of range, a model or limit\n"
      "--config refuses, a directory where a file goes, a --key that already names a job with other\n"
      "content; with --jsonl/--dir: some lines or documents were rejected, the others are queued),\n"
      "1 database failure.\n");
  cmd->callback([a, positional, &exit_code] {
    a->prompt_given = positional->count() > 0;
    run_command("submit", exit_code, [&] {
      if (a->spec.model.empty() && a->jsonl.empty()) throw CommandError{kUsage, "--model is required"};
      apply_grammar_flags(a->grammar, a->spec.sampling);
      if (!a->jsonl.empty()) return submit_jsonl_file(*a, exit_code);
      if (!a->dir.empty()) return submit_document_dir(*a, exit_code);
      // A key names one request: the same key with other content is refused
      // (exit 4), as a changed JSONL line is, instead of returning the old job.
      std::vector<std::string> conflicts;
      auto print = [&](jobs::Queue& queue, const jobs::SubmitOutcome& out, const jobs::JobSpec& spec) {
        const std::string& key = spec.idempotency_key;
        if (!out.created) {
          const std::optional<jobs::Job> old = queue.get(out.id);
          const std::string diff = old ? jobs::spec_difference(old->spec, spec) : std::string();
          if (!diff.empty()) {
            conflicts.push_back("key '" + key + "' already names job " + std::to_string(out.id) + " (" +
                                jobs::state_name(old->state) + ") with another " + diff +
                                "; nothing was queued for it: give the changed request a new --key, or `nightshift "
                                "show " +
                                std::to_string(out.id) + "` to see what the key holds");
            return;
          }
        }
        if (a->json) {
          std::cout << daemon::json_text({{"id", out.id}, {"created", out.created}}) << "\n";
        } else {
          std::cout << out.id << "\n";
          if (!out.created) {
            std::fprintf(stderr, "nightshift submit: key '%s' already names job %lld; nothing new was queued\n",
                         printable(key).c_str(), static_cast<long long>(out.id));
          }
        }
      };
      if (!a->prompt_lines.empty()) {
        std::vector<int> line_numbers;
        const std::vector<jobs::JobSpec> specs =
            specs_from_lines(read_prompt("", a->prompt_lines), a->spec, line_numbers);
        if (specs.empty()) throw CommandError{kInvalidInput, a->prompt_lines + " has no non-empty line"};
        check_model(*a);
        // Each line's prompt against the context, as submit --jsonl checks each request (#31: these were not).
        ModelCheck check = model_check_for(a->db, a->any_model);
        std::string first;
        int64_t bad = 0;
        for (size_t k = 0; k < specs.size(); ++k) {
          if (std::string problem = check.problem(specs[k]); !problem.empty() && bad++ == 0)
            first = "line " + std::to_string(line_numbers[k]) + ": " + problem;
        }
        if (bad > 0)
          throw CommandError{
              kInvalidInput,
              first +
                  (bad > 1 ? " (and " + std::to_string(bad - 1) + (bad == 2 ? " more line)" : " more lines)") : "") +
                  "; nothing was queued"};
        auto queue = open_queue(a->db);
        constexpr size_t kChunk = 200;  // one commit per chunk: fast, and short write locks for the daemon
        for (size_t i = 0; i < specs.size(); i += kChunk) {
          const size_t n = std::min(kChunk, specs.size() - i);
          const std::vector<jobs::SubmitOutcome> outs = queue->submit_many(std::span(specs).subspan(i, n));
          for (size_t k = 0; k < outs.size(); ++k) print(*queue, outs[k], specs[i + k]);
        }
        std::cout.flush();
        refuse_conflicts(conflicts);
        return;
      }
      if (a->prompt_given && a->prompt.empty()) {
        throw CommandError{kInvalidInput, "the prompt is empty; give the text to continue"};
      }
      if (a->prompt.empty() && a->prompt_file.empty()) {
        throw CommandError{kUsage,
                           "give the prompt as an argument, with --prompt-file FILE, --prompt-lines FILE, "
                           "--jsonl FILE, --dir FOLDER, or - for stdin"};
      }
      a->spec.prompt = read_prompt(a->prompt, a->prompt_file);
      check_model(*a);
      auto queue = open_queue(a->db);
      print(*queue, queue->submit(a->spec), a->spec);
      refuse_conflicts(conflicts);
    });
  });
}

// ---- list -------------------------------------------------------------------

void add_list(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    std::string state, batch, model;
    int32_t limit = 50;
    bool json = false, csv = false;
  };
  auto a = std::make_shared<Args>();
  std::vector<std::string> states;
  for (jobs::JobState s : jobs::kAllJobStates) states.emplace_back(jobs::state_name(s));
  CLI::App* cmd = app.add_subcommand("list", "List jobs, newest first");
  cmd->add_option("--state", a->state, "only jobs in this state")->check(CLI::IsMember(states));
  cmd->add_option("--batch", a->batch, "only jobs of this batch (submit --jsonl / --dir)");
  cmd->add_option("--limit", a->limit, "at most N jobs; 0 = all")->capture_default_str();
  cmd->add_option("--model", a->model, "only jobs for this model");
  auto* json = cmd->add_flag("--json", a->json, "print a JSON array of job objects (the fields of `show --json`)");
  cmd->add_flag("--csv", a->csv, "print CSV (RFC 4180) with batch, custom_id, times, counts and the full text")
      ->excludes(json);
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift list\n"
      "  nightshift list --model kimi --state dead --limit 0 --csv > dead.csv\n"
      "  nightshift list --state failed --limit 10\n"
      "  nightshift list --batch reviews-0412 --state failed\n"
      "  nightshift list --state done --json | jq -r '.[].result.text'\n"
      "Exit status: 0 listed (also when no job matches), 2 bad command line, 3 no such batch, 1 database\n"
      "failure.\n");
  cmd->callback([a, &exit_code] {
    run_command("list", exit_code, [&] {
      auto queue = open_existing(a->db);
      if (!a->batch.empty()) require_batch(*queue, a->batch);
      jobs::ListFilter filter;
      filter.state = a->state.empty() ? std::nullopt : jobs::parse_state(a->state);
      filter.batch = a->batch;
      filter.model = a->model;
      filter.limit = a->limit;
      const std::vector<jobs::Job> jobs = queue->list(filter);
      if (a->csv) {
        std::cout << daemon::format_job_csv(jobs);
        return;
      }
      if (a->json) {
        nlohmann::json arr = nlohmann::json::array();
        for (const jobs::Job& j : jobs) arr.push_back(daemon::job_to_json(j));
        std::cout << daemon::json_text(arr, 2) << "\n";
        return;
      }
      std::cout << daemon::format_job_table(jobs);
      const jobs::QueueCounts c = a->batch.empty() ? queue->counts() : queue->counts(a->batch);
      if (!a->batch.empty()) std::cout << "batch " << a->batch << ": ";
      std::cout << "queued " << c.queued << (c.held > 0 ? " (held " + std::to_string(c.held) + ")" : "") << ", running "
                << c.running << ", done " << c.done << ", failed " << c.failed << ", cancelled " << c.cancelled
                << ", dead " << c.dead << "\n";
      if (c.held > 0) std::cout << printable(held_text(c, a->batch)) << "\n";
    });
  });
}

// ---- show -------------------------------------------------------------------

void add_show(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    int64_t id = 0;
    bool json = false;
    bool full = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("show", "Show one job: every field, the result and its stats, its attempts");
  cmd->add_option("id", a->id, "job id")->required();
  cmd->add_flag("--json", a->json, "print the job as a JSON object (always whole)");
  cmd->add_flag("--full", a->full,
                "print a long prompt, messages or output whole (by default a text above 8 KiB shows its first "
                "4 KiB and last 1 KiB)");
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift show 42\n"
      "  nightshift show 42 --full | less\n"
      "  nightshift show 42 --json | jq .result.decode_tok_s\n"
      "Exit status: 0 shown, 3 no such job, 1 database failure.\n");
  cmd->callback([a, &exit_code] {
    run_command("show", exit_code, [&] {
      auto queue = open_existing(a->db);
      std::optional<jobs::Job> job = queue->get(a->id);
      if (!job) throw CommandError{kNotFound, "no job " + std::to_string(a->id) + " in this database"};
      const std::vector<jobs::AttemptRecord> history = queue->attempts(a->id);
      if (a->json) {
        nlohmann::json j = daemon::job_to_json(*job);
        j["history"] = daemon::attempts_to_json(history);
        std::cout << daemon::json_text(j, 2) << "\n";
      } else {
        // On a terminal, control characters in prompts and outputs are shown,
        // not obeyed; into a pipe or file the text goes out as it is.
        std::cout << daemon::format_job_details(*job, ::isatty(STDOUT_FILENO) == 1, !a->full)
                  << daemon::format_attempts(history);
      }
    });
  });
}

// ---- cancel -----------------------------------------------------------------

// Which jobs `cancel` and `retry` act on: the ids given, or the jobs of
// --batch NAME in --state STATE (default: every state in `wanted`). Jobs of
// other states are left alone. Throws kUsage for neither or both, kNotFound
// for a batch with no job at all. `keep` narrows a batch's jobs further (retry:
// a queued job only when a daemon holds it; --from-model).
struct Selection {
  std::vector<int64_t> ids;
  std::string batch, state;
};

// `choices`: the states the command can act on; --state offers only those (#31: cancel offered `done`).
void add_selection_options(CLI::App* cmd, Selection& sel, const char* states, const std::vector<std::string>& choices) {
  cmd->add_option("id", sel.ids, "job ids (several may be given)");
  cmd->add_option("--batch", sel.batch, "every job of this batch (nightshift status lists the batches)");
  cmd->add_option("--state", sel.state, std::string("with --batch: only jobs in this state (default: ") + states + ")")
      ->check(CLI::IsMember(choices));
}

std::vector<int64_t> selected_ids(jobs::Queue& queue, const Selection& sel, std::vector<jobs::JobState> wanted,
                                  const char* command, const std::function<bool(const jobs::Job&)>& keep = {},
                                  const std::string& also = "") {
  if (!sel.ids.empty() && !sel.batch.empty()) throw CommandError{kUsage, "give job ids or --batch NAME, not both"};
  if (sel.ids.empty() && sel.batch.empty()) throw CommandError{kUsage, "give job ids or --batch NAME"};
  if (!sel.state.empty() && sel.batch.empty()) throw CommandError{kUsage, "--state goes with --batch NAME"};
  if (!sel.ids.empty()) return sel.ids;
  if (!sel.state.empty()) wanted = {*jobs::parse_state(sel.state)};
  jobs::ListFilter filter;
  filter.batch = sel.batch;
  filter.limit = 0;
  filter.order = jobs::ListFilter::Order::oldest_first;
  const std::vector<jobs::Job> all = queue.list(filter);
  if (all.empty()) throw CommandError{kNotFound, "no job of batch " + sel.batch + " in this database"};
  std::vector<int64_t> ids;
  for (const jobs::Job& j : all) {
    if (std::find(wanted.begin(), wanted.end(), j.state) != wanted.end() && (!keep || keep(j))) ids.push_back(j.id);
  }
  if (ids.empty()) {
    std::string names;
    for (jobs::JobState w : wanted) names += (names.empty() ? "" : " or ") + std::string(jobs::state_name(w));
    std::fprintf(stderr, "nightshift %s: batch %s has no %s job%s\n", command, sel.batch.c_str(), names.c_str(),
                 also.c_str());
  }
  return ids;
}

void add_cancel(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    Selection sel;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "cancel", "Cancel jobs: a queued job at once, a running one when the daemon next checks (within ~1 s)");
  add_selection_options(cmd, a->sel, "queued and running", {"queued", "running"});
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift cancel 42\n"
      "  nightshift cancel 42 43 44\n"
      "  nightshift cancel --batch nightly              # every queued or running job of the batch\n"
      "  nightshift cancel --batch nightly --state queued\n"
      "Exit status: 0 cancelled or cancel requested, 3 no such job (or batch), 1 a job had already finished.\n");
  cmd->callback([a, &exit_code] {
    run_command("cancel", exit_code, [&] {
      auto queue = open_existing(a->db);
      const std::vector<int64_t> ids =
          selected_ids(*queue, a->sel, {jobs::JobState::queued, jobs::JobState::running}, "cancel");
      // One job: its problem is the error line; several: one line each, then a summary.
      std::optional<CommandError> first_error;
      const auto refuse = [&](int code, const std::string& message) {
        if (ids.size() > 1) std::fprintf(stderr, "nightshift cancel: %s\n", message.c_str());
        if (!first_error) first_error = CommandError{code, ids.size() > 1 ? "some jobs were not cancelled" : message};
      };
      for (int64_t id : ids) {
        const std::string name = "job " + std::to_string(id);
        const bool accepted = queue->cancel(id);
        const std::optional<jobs::Job> job = queue->get(id);
        if (!job) {
          refuse(kNotFound, "no " + name + " in this database");
        } else if (!accepted) {
          refuse(kFailure, name + " is already " + jobs::state_name(job->state) + "; nothing to cancel");
        } else if (job->state == jobs::JobState::running) {
          std::cout << name << " is running; cancel requested (the daemon stops it at its next check)\n";
        } else {
          std::cout << name << " " << jobs::state_name(job->state) << "\n";
        }
      }
      if (first_error) throw *first_error;
    });
  });
}

// ---- retry ------------------------------------------------------------------

void add_retry(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    Selection sel;
    std::string model, from_model;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "retry", "Queue failed, dead or cancelled jobs again, as new (attempts reset, result and checkpoint dropped)");
  add_selection_options(cmd, a->sel, "failed, dead and cancelled; with --model the held ones too",
                        {"failed", "dead", "cancelled", "queued"});
  cmd->add_option("--model", a->model,
                  "run the retried jobs on this model from now on (jobs queued under a wrong model name)");
  cmd->add_option("--from-model", a->from_model, "with --batch: only the jobs now under this model name");
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift retry 42 43\n"
      "  nightshift retry --batch nightly --model mixtral   # a night held or failed under a wrong model name\n"
      "  nightshift retry --batch nightly --from-model mixtrl --model mixtral   # only the typo's jobs\n"
      "  nightshift list --state dead --json | jq -r '.[].id' | xargs nightshift retry\n"
      "The attempts so far stay in the job's history (nightshift show ID).\n"
      "With --model, held jobs (queued, a daemon cannot serve their model) are moved too, and the model is checked\n"
      "against --config's models:; --state queued moves every queued job of the batch.\n"
      "Exit status: 0 all queued again, 3 an id (or the batch) is unknown, 4 --model is not servable (--config),\n"
      "1 a job is running or done (or queued, without --model).\n");
  cmd->callback([a, &exit_code] {
    run_command("retry", exit_code, [&] {
      auto queue = open_existing(a->db);
      // With --model, queued jobs too: those a daemon holds because it cannot serve their model.
      std::vector<jobs::JobState> states = {jobs::JobState::failed, jobs::JobState::dead, jobs::JobState::cancelled};
      if (!a->model.empty()) states.push_back(jobs::JobState::queued);
      if (!a->from_model.empty() && a->sel.batch.empty())
        throw CommandError{kUsage, "--from-model goes with --batch NAME"};
      // A batch's queued jobs waiting for a daemon that can serve them stay put: only the held ones move
      // (#31: re-pointing a whole night moved the jobs of its good models too), unless --state queued says so.
      const auto keep = [&](const jobs::Job& j) {
        if (!a->from_model.empty() && j.spec.model != a->from_model) return false;
        return j.state != jobs::JobState::queued || !a->sel.state.empty() || jobs::is_held(j);
      };
      const std::string also = a->from_model.empty() ? "" : " under model " + a->from_model;
      const std::vector<int64_t> ids = selected_ids(*queue, a->sel, states, "retry", keep, also);
      if (!a->model.empty() && !a->sel.batch.empty() && a->from_model.empty()) {
        // Re-pointing jobs of several models at once would hide a cause behind another (a typo's jobs and a
        // missing disk's): with more than one, the command asks which.
        std::map<std::string, int64_t> models;
        for (int64_t id : ids) {
          if (const std::optional<jobs::Job> job = queue->get(id)) ++models[job->spec.model];
        }
        if (models.size() > 1) {
          std::string list;
          for (const auto& [m, n] : models) list += (list.empty() ? "" : ", ") + m + " (" + std::to_string(n) + ")";
          throw CommandError{kUsage, "batch " + a->sel.batch + "'s jobs to move are under " +
                                         std::to_string(models.size()) + " models: " + list +
                                         "; say which with --from-model NAME (nothing was moved)"};
        }
      }
      ModelCheck check = model_check_for(a->db, false);
      std::map<std::string, std::vector<int64_t>> not_moved;  // by problem: a typo is said once, not once a job
      std::optional<CommandError> first_error;
      for (int64_t id : ids) {
        const std::string name = "job " + std::to_string(id);
        if (!a->model.empty()) {  // the new model, checked as submit --config checks one (name, file, template)
          if (std::optional<jobs::Job> job = queue->get(id)) {
            job->spec.model = a->model;
            if (const std::string problem = check.problem(job->spec); !problem.empty()) {
              not_moved[problem].push_back(id);
              if (!first_error) first_error = CommandError{kInvalidInput, "some jobs were not retried"};
              continue;
            }
          }
        }
        switch (queue->retry(id, a->model)) {
          case jobs::RetryOutcome::requeued:
            std::cout << name << " queued again" << (a->model.empty() ? "" : " on model " + a->model) << "\n";
            break;
          case jobs::RetryOutcome::not_found:
            std::fprintf(stderr, "nightshift retry: no %s in this database\n", name.c_str());
            if (!first_error) first_error = CommandError{kNotFound, "some jobs were not retried"};
            break;
          case jobs::RetryOutcome::not_retryable: {
            const std::optional<jobs::Job> job = queue->get(id);
            std::fprintf(stderr,
                         "nightshift retry: %s is %s; only failed, dead or cancelled jobs can be retried (and "
                         "queued ones moved with --model)\n",
                         name.c_str(), job ? jobs::state_name(job->state) : "gone");
            if (!first_error) first_error = CommandError{kFailure, "some jobs were not retried"};
            break;
          }
        }
      }
      for (const auto& [problem, moved] : not_moved) {
        std::string jobs = moved.size() == 1 ? "job " : std::to_string(moved.size()) + " jobs (";
        for (size_t i = 0; i < moved.size() && i < 5; ++i) jobs += (i ? ", " : "") + std::to_string(moved[i]);
        if (moved.size() > 1) jobs += moved.size() > 5 ? ", ...)" : ")";
        std::fprintf(stderr, "nightshift retry: %s not moved: %s\n", jobs.c_str(), printable(problem).c_str());
      }
      if (first_error) throw *first_error;
    });
  });
}

// ---- prune ------------------------------------------------------------------

// More jobs than this in one prune are confirmed (a question, or --yes).
constexpr int64_t kPruneAsk = 20;

// "30d", "2w", "12h", "90min", "3600s" in milliseconds; CommandError (kUsage)
// otherwise. "m" is refused: `prune --older-than 1m` once deleted a minute's
// jobs from someone who meant a month (#31); a bare number gets a hint.
int64_t parse_age_ms(const std::string& text) {
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  const std::string unit = n >= 0 ? text.substr(used) : "";
  const std::string kUnits = "a whole number of weeks, days, hours, minutes or seconds (2w, 30d, 12h, 90min, 3600s)";
  if (n >= 0 && unit.empty()) {
    throw CommandError{kUsage, "--older-than " + text + " has no unit: " + kUnits + "; did you mean " + text + "d?"};
  }
  if (n >= 0 && unit == "m") {
    throw CommandError{kUsage, "--older-than " + text + " is ambiguous: minutes are " + std::to_string(n) +
                                   "min; a month is about 30d (" + kUnits + ")"};
  }
  const int64_t per = unit == "w"     ? 7 * 86'400'000
                      : unit == "d"   ? 86'400'000
                      : unit == "h"   ? 3'600'000
                      : unit == "min" ? 60'000
                      : unit == "s"   ? 1000
                                      : 0;
  if (n < 0 || per == 0 || n > INT64_MAX / per) {
    throw CommandError{kUsage, "--older-than takes " + kUnits + ", got '" + text + "'"};
  }
  return n * per;
}

void add_prune(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    std::string older_than;
    std::vector<std::string> states;
    bool dry_run = false;
    bool yes = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "prune", "Delete old finished jobs with their attempts, checkpoints and results (safe while daemons run)");
  cmd->add_option("--older-than", a->older_than, "jobs that finished longer ago than this: 2w, 30d, 12h, 90min, 3600s")
      ->required();
  cmd->add_flag("--dry-run", a->dry_run, "count what would be deleted, delete nothing");
  cmd->add_flag("--yes", a->yes,
                "delete more than " + std::to_string(kPruneAsk) +
                    " jobs without asking (needed when stdin is not a "
                    "terminal: a timer or a script)");
  cmd->add_option("--state", a->states,
                  "only jobs in this final state (repeatable; default: done, failed, cancelled and dead)")
      ->check(CLI::IsMember({"done", "failed", "cancelled", "dead"}))
      ->allow_extra_args(false);
  add_database_options(cmd, a->db);
  cmd->footer(
      "Queued and running jobs are never deleted. Everything goes in one transaction: a prune that fails\n"
      "deletes nothing. The file does not shrink (SQLite reuses the pages); see docs/operations.md.\n"
      "More than " +
      std::to_string(kPruneAsk) +
      " jobs: asked on a terminal, refused elsewhere without --yes.\n"
      "Examples:\n"
      "  nightshift prune --older-than 30d --state done --dry-run\n"
      "  nightshift prune --older-than 30d --state done\n"
      "  nightshift prune --older-than 12w --yes          # from a timer\n"
      "Exit status: 0 pruned, counted (--dry-run) or declined at the question, 2 bad command line or more\n"
      "than " +
      std::to_string(kPruneAsk) + " jobs without --yes off a terminal, 1 database failure.\n");
  cmd->callback([a, &exit_code] {
    run_command("prune", exit_code, [&] {
      const int64_t age_ms = parse_age_ms(a->older_than);
      std::vector<jobs::JobState> states;
      for (const std::string& s : a->states) states.push_back(*jobs::parse_state(s));
      if (states.empty()) {
        states = {jobs::JobState::done, jobs::JobState::failed, jobs::JobState::cancelled, jobs::JobState::dead};
      }
      auto queue = open_existing(a->db);
      std::string names;
      for (jobs::JobState s : states) names += (names.empty() ? "" : ", ") + std::string(jobs::state_name(s));
      const std::string what = " (" + names + ") that finished more than " + a->older_than + " ago";
      const int64_t count = queue->prune(age_ms, states, /*dry_run=*/true);
      if (a->dry_run) {
        std::cout << "would delete " << count << " job(s)" << what << ", with their attempts and results (--dry-run: "
                  << "nothing deleted)\n";
        return;
      }
      if (count > kPruneAsk && !a->yes) {
        const std::string question = "delete " + std::to_string(count) + " job(s)" + what;
        if (::isatty(STDIN_FILENO) != 1) {
          throw CommandError{kUsage, "would " + question + ": add --yes to delete them (asked above " +
                                         std::to_string(kPruneAsk) + " jobs), or --dry-run to count only"};
        }
        std::cerr << question << ", with their attempts and results? [y/N] " << std::flush;
        std::string answer;
        std::getline(std::cin, answer);
        if (answer != "y" && answer != "yes") {
          std::cout << "nothing deleted\n";
          return;
        }
      }
      const int64_t n = queue->prune(age_ms, states);
      std::cout << "deleted " << n << " job(s)" << what << ", with their attempts and results\n";
    });
  });
}

}  // namespace

void add_queue_commands(CLI::App& app, int& exit_code) {
  add_submit(app, exit_code);
  add_list(app, exit_code);
  add_show(app, exit_code);
  add_cancel(app, exit_code);
  add_retry(app, exit_code);
  add_prune(app, exit_code);
}

}  // namespace ns::cli
