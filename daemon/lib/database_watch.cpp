#include "daemon/lib/database_watch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "jobs/open_queue.h"

namespace ns::daemon {
namespace {

// The file `path` names now; inode 0 if none (or it cannot be read).
auto id_of(const std::string& path) {
  struct stat st {};
  struct Id {
    uint64_t device = 0, inode = 0;
    int error = 0;
  } id;
  if (::stat(path.c_str(), &st) != 0) {
    id.error = errno;
    return id;
  }
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  return id;
}

}  // namespace

DatabaseFileWatch::DatabaseFileWatch(std::string database) {
  if (database.empty() || database == ":memory:" || jobs::is_postgres_url(database)) return;
  const auto db = id_of(database);
  if (db.inode == 0) return;  // not a file we can name (a URI form): nothing to compare
  path_ = std::move(database);
  database_ = {db.device, db.inode};
  const auto wal = id_of(path_ + "-wal"), shm = id_of(path_ + "-shm");
  wal_ = {wal.device, wal.inode};
  shm_ = {shm.device, shm.inode};
}

std::string DatabaseFileWatch::changed() const {
  if (path_.empty()) return "";
  const auto now = id_of(path_);
  if (now.inode == 0) return now.error == ENOENT ? "deleted" : "";  // EACCES, EIO...: not evidence of a swap
  if (now.device != database_.device || now.inode != database_.inode) return "replaced by another file";
  return "";
}

std::string DatabaseFileWatch::set_aside_companions() const {
  std::string moved;
  const std::string suffix = ".stale-" + std::to_string(::getpid());
  for (const auto& [name, opened] : {std::pair{path_ + "-wal", wal_}, std::pair{path_ + "-shm", shm_}}) {
    if (path_.empty() || opened.inode == 0) continue;
    const auto now = id_of(name);
    if (now.inode != opened.inode || now.device != opened.device) continue;  // gone, or the new file's own
    if (std::rename(name.c_str(), (name + suffix).c_str()) == 0) moved += (moved.empty() ? "" : ", ") + name + suffix;
  }
  return moved;
}

}  // namespace ns::daemon
