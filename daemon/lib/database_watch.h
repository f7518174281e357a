// Notices the daemon's SQLite file deleted or replaced under it (#30 J). An
// open connection keeps reading and writing the unlinked file: results would
// vanish with it, and jobs submitted to a new file at that path would never
// be served. The daemon checks this on its heartbeat and stops, loudly.
//
// Contract: the constructor records which file `database` names (device and
// inode) right after the queue opened it; changed() stats the path again and
// returns "" while it names that file, else what happened ("deleted",
// "replaced by another file"), for the log. PostgreSQL URLs and in-memory
// databases have no file: changed() is always "". Cheap (one stat); any thread.
//
// set_aside_companions(): SQLite leaves the old file's -wal and -shm beside
// the path when the file was moved or deleted under an open connection (it
// will not checkpoint into a moved file), and the next process to open the
// path would apply that WAL to the new file: the old file's last transactions
// written over a restored backup, or a deleted queue resurrected into a new
// one. It renames them to NAME-wal.stale-PID and NAME-shm.stale-PID if they are
// still the very files this daemon's connections opened (same inode), and
// says what it did ("" when there was nothing to move).
#pragma once

#include <cstdint>
#include <string>

namespace ns::daemon {

class DatabaseFileWatch {
 public:
  explicit DatabaseFileWatch(std::string database);
  std::string changed() const;
  std::string set_aside_companions() const;

 private:
  struct FileId {
    uint64_t device = 0, inode = 0;  // inode 0: the file did not exist
  };
  std::string path_;  // "" = nothing to watch
  FileId database_, wal_, shm_;
};

}  // namespace ns::daemon
