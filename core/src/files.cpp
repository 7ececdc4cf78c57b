#include "placelab/core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <system_error>

#include "placelab/core/error.h"

namespace placelab {

std::string read_text_file(const std::filesystem::path& path, int64_t max_bytes) {
  const auto reason = [](int err) { return std::generic_category().message(err); };
  // O_NONBLOCK: opening a FIFO nobody writes to returns at once instead of waiting for a writer;
  // fstat then refuses it with every other file that is not a regular one (a device such as
  // /dev/zero would be read until memory ran out).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(path.string() + ": cannot read: " + reason(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    if (st.st_mode == 0) throw InputError(path.string() + ": cannot read: " + reason(err));
    const char* what = S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                     : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
    throw InputError(path.string() + ": cannot read: it is " + what + "; placelab reads regular files");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  // The limit holds on the bytes actually read: a file may grow while it is read.
  const auto too_big = [&] {
    ::close(fd);
    return InputError(path.string() + ": larger than " + std::to_string(max_bytes >> 20) + " MiB, the most placelab reads " +
                      "of such a file");
  };
  if (st.st_size > max_bytes) throw too_big();
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(path.string() + ": cannot read: " + reason(err));
    }
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > max_bytes) throw too_big();
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  auto reason = [](int err) { return std::generic_category().message(err); };
  const std::filesystem::path dir = path.parent_path();
  const std::string base = path.filename().string();
  if (base.empty() || base == "." || base == "..")
    throw InputError("cannot write " + path.string() + ": the path names a directory, not a file");
  std::error_code no_stat;
  if (std::filesystem::is_directory(path, no_stat))
    throw InputError("cannot write " + path.string() + ": it is a folder; name a file in it");
  // rename() would replace a device, FIFO or socket by a regular file (as root, /dev/null too).
  // A link is replaced itself, never written through.
  const auto kind = std::filesystem::symlink_status(path, no_stat).type();
  if (kind != std::filesystem::file_type::not_found && kind != std::filesystem::file_type::regular &&
      kind != std::filesystem::file_type::symlink && kind != std::filesystem::file_type::none)
    throw InputError("cannot write " + path.string() + ": it is not a regular file (a device, FIFO or socket); "
                     "placelab writes files only");

  // The temporary file lives next to the target, because rename() is atomic only within one file
  // system. Its name is hidden, unique per process and call, and short enough for NAME_MAX.
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    // Built by append: gcc 12 gives a false -Wrestrict on "." + std::string here.
    std::string tmp_name(1, '.');
    tmp_name.append(base, 0, 180).append(".tmp.").append(std::to_string(::getpid()));
    tmp_name.append(".").append(std::to_string(counter.fetch_add(1)));
    tmp = dir / tmp_name;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt >= 100)) {
      // A folder that is missing, not a folder, or not ours to write is the user's path to
      // mend (InputError, exit 2); anything else is the system's.
      const std::string what = "cannot write " + path.string() + ": cannot create a temporary file in " +
                               (dir.empty() ? std::string(".") : dir.string()) + ": " + reason(errno);
      if (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == EROFS) throw InputError(what);
      throw Error(what);
    }
  }
  auto fail = [&](const std::string& step, int err, bool close_fd) {
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    const std::string what = "cannot write " + path.string() + ": " + step + ": " + reason(err);
    // A full disk or quota, or a target that is a folder or not ours to replace, is the user's
    // to mend (exit 2); other failures are the system's.
    if (err == ENOSPC || err == EDQUOT || err == EISDIR || err == ENOTEMPTY || err == EEXIST || err == EACCES ||
        err == EPERM || err == EROFS || err == ENOTDIR)
      throw InputError(what);
    throw Error(what);
  };
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing the temporary file", n < 0 ? errno : EIO, true);
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("flushing the temporary file", errno, true);
  if (::close(fd) != 0) fail("closing the temporary file", errno, false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming the temporary file over it", errno, false);
  // Persist the rename itself; a failure here leaves a complete file, so it is not an error.
  int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void append_file_durably(const std::filesystem::path& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    const std::string what = "cannot append to " + path.string() + ": " +
                             (err == ELOOP ? std::string("it is a symbolic link; placelab does not write through links")
                                           : std::generic_category().message(err));
    if (err == ELOOP || err == ENOENT || err == ENOTDIR || err == EACCES || err == EROFS || err == EISDIR ||
        err == ENXIO)
      throw InputError(what);
    throw Error(what);
  }
  auto fail = [&](const std::string& why, bool user) {
    ::close(fd);
    const std::string what = "cannot append to " + path.string() + ": " + why;
    if (user) throw InputError(what);
    throw Error(what);
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(std::generic_category().message(errno), false);
  if (!S_ISREG(st.st_mode)) fail("it is not a regular file (a device, FIFO or socket); placelab writes files only", true);
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      fail(std::generic_category().message(err), err == ENOSPC || err == EDQUOT);
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fdatasync(fd) != 0) fail(std::generic_category().message(errno), false);
  if (::close(fd) != 0) throw Error("cannot append to " + path.string() + ": " + std::generic_category().message(errno));
}

}  // namespace placelab
