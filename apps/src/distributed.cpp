// The MPI side of placelab (distributed.h). Only rank 0's main thread talks to the others and
// every wait is a poll with a short sleep: OpenMPI's blocking calls spin a core, which a 2-core
// machine running 2 ranks cannot spare.
#include "distributed.h"

#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "inputs.h"
#include "placelab/core/error.h"
#include "placelab/hwmodels/cluster.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/profiler/median.h"
#include "placelab/sim/sim_environment.h"
#include "sweep.h"

namespace placelab::cli {
namespace fs = std::filesystem;

namespace {

bool g_initialised = false;
bool g_agreed_error = false;  // the error being handled was met by every rank (see end_mpi_after_error)
// A rank of the job died (a sweep gave it up). MPI_Finalize may then wait for it for ever (OpenMPI
// 4.1 without fault tolerance; seen in one run of the kill test in ten): the live ranks end without
// it, which `mpirun --enable-recovery` — the only way the job outlived the rank — accepts.
bool g_rank_lost = false;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(fmt::format("MPI: {} failed: {}", what, std::string(text, static_cast<std::size_t>(len))));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void nap() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

// Every rank's verdict on a step every rank takes (reading the inputs): true when all succeeded.
// A rank that failed prints its own message unless rank 0 failed too (rank 0's is the job's).
bool all_ranks_ok(const MpiWorld& w, const std::string& my_error) {
  int mine = my_error.empty() ? 1 : 0, all = 0, root_ok = mine;
  check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  check(MPI_Bcast(&root_ok, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (!all) g_agreed_error = true;
  if (!mine && w.rank != 0 && root_ok) std::cerr << "placelab: error: rank " << w.rank << ": " << my_error << "\n";
  return all != 0;
}

// After all_ranks_ok said no: rank 0 throws its error (or names the ranks' failure), others exit.
[[noreturn]] void fail_agreed(const MpiWorld& w, const std::string& my_error) {
  if (w.rank != 0) throw QuietExit{2};
  if (!my_error.empty()) throw InputError(my_error);
  throw InputError("some ranks could not read the inputs (their messages are above)");
}

// An error every rank meets alike (a bad option): rank 0 reports it, the others exit quietly.
[[noreturn]] void fail_everywhere(const MpiWorld& w, const std::string& message) {
  g_agreed_error = true;
  if (w.rank != 0) throw QuietExit{2};
  throw InputError(message);
}

}  // namespace

MpiWorld mpi_world() {
  MpiWorld w;
  if (!under_mpi_launcher()) return w;
  if (!g_initialised) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    g_initialised = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  return w;
}

void finalize_mpi() {
  if (!g_initialised) return;
  g_initialised = false;
  if (!g_rank_lost) MPI_Finalize();
}

void end_mpi_after_error(int code) {
  if (!g_initialised) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (g_agreed_error || size == 1) return finalize_mpi();
  std::cerr.flush();
  MPI_Abort(MPI_COMM_WORLD, code);
}

// --------------------------------------------------------------------------------------------
// Distributed sweep.

namespace {

// Worker → rank 0, tag kToRoot: {event, unit, end}. Rank 0 → worker, tag kToWorker: {unit,
// scenario, seed or 0 for the summary run} (unit −1: no more work, leave; then 1 if a rank was lost).
enum Tag : int { kToRoot = 11, kToWorker = 12 };
enum Event : int64_t { kRequest = 0, kFinished = 1, kHeartbeat = 2 };
constexpr double kHeartbeatEvery_s = 1.0;
constexpr int kMaxAttempts = 3;  // a run whose process or rank was killed is run again, twice

// One piece of a sweep: a seed's learner runs of a scenario, or the scenario's summary run
// (`run --resume`, every seed's records kept) once all its seeds are done.
struct Unit {
  std::size_t scenario = 0;
  std::optional<uint64_t> seed;  // nullopt: the summary run
  int attempts = 0;
  int rank = -1;  // where it runs now; -1 when queued or done
  double started_s = 0;  // when it was handed out (rank 0's clock)
};

// The runs a rank has going as child processes.
class Slots {
 public:
  Slots(const DistributedSweep& sweep, const std::vector<Scenario>& scenarios, fs::path logs)
      : sweep_(sweep), scenarios_(scenarios), logs_(std::move(logs)) {}

  void start(int64_t id, const Unit& u) {
    std::vector<std::string> args = {"run", sweep_.files[u.scenario], "--quiet"};
    if (u.seed) {
      args.insert(args.end(), {"--only-seed", std::to_string(*u.seed)});
    } else {
      args.push_back("--resume");
      if (sweep_.seeds) args.insert(args.end(), {"--seeds", std::to_string(*sweep_.seeds)});
    }
    children_[spawn_placelab(args, log_of(u))] = id;
  }
  fs::path log_of(const Unit& u) const {
    const std::string& name = scenarios_[u.scenario].name;
    return logs_ / (u.seed ? fmt::format("{}-seed{}.log", name, *u.seed) : name + ".log");
  }
  // A child that ended: its unit and how, or nullopt.
  std::optional<std::pair<int64_t, ChildEnd>> reap() {
    if (children_.empty()) return std::nullopt;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return std::nullopt;
    auto it = children_.find(pid);
    if (it == children_.end()) return std::nullopt;
    const int64_t id = it->second;
    children_.erase(it);
    return std::pair{id, child_end(status)};
  }
  void forward_stop() {
    for (const auto& c : children_) kill(c.first, SIGINT);
  }
  std::size_t running() const { return children_.size(); }

 private:
  const DistributedSweep& sweep_;
  const std::vector<Scenario>& scenarios_;
  fs::path logs_;
  std::map<pid_t, int64_t> children_;
};

void send_to_root(int64_t event, int64_t unit, int64_t end) {
  const int64_t msg[3] = {event, unit, end};
  check(MPI_Send(msg, 3, MPI_INT64_T, 0, kToRoot, MPI_COMM_WORLD), "MPI_Send");
}

// Ranks other than 0: ask for units, run them, report, until rank 0 says there is no more.
void sweep_worker(const DistributedSweep& sweep, Slots& slots) {
  std::size_t asked = 0;  // requests rank 0 has not answered
  bool forwarded = false;
  double last_sent = now_s();
  for (;;) {
    while (!sweep_stop_requested() && slots.running() + asked < static_cast<std::size_t>(sweep.jobs)) {
      send_to_root(kRequest, -1, 0);
      ++asked;
      last_sent = now_s();
    }
    bool busy = false;
    int flag = 0;
    MPI_Status st;
    check(MPI_Iprobe(0, kToWorker, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
    if (flag) {
      int64_t msg[3] = {-1, 0, 0};
      check(MPI_Recv(msg, 3, MPI_INT64_T, 0, kToWorker, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
      if (msg[0] < 0) {  // rank 0 sends this only when no run is going anywhere
        g_rank_lost = msg[1] != 0;
        return;
      }
      asked -= asked > 0;
      Unit u{static_cast<std::size_t>(msg[1])};
      if (msg[2] > 0) u.seed = static_cast<uint64_t>(msg[2]);
      slots.start(msg[0], u);
      busy = true;
    }
    if (auto done = slots.reap()) {
      // A finished run frees a slot: the report is also the next request.
      send_to_root(kFinished, done->first, static_cast<int64_t>(done->second));
      ++asked;
      last_sent = now_s();
      busy = true;
    }
    if (sweep_stop_requested() && !forwarded) {
      slots.forward_stop();
      forwarded = true;
    }
    if (slots.running() > 0 && now_s() - last_sent > kHeartbeatEvery_s) {
      send_to_root(kHeartbeat, -1, 0);
      last_sent = now_s();
    }
    if (!busy) nap();
  }
}

// Rank 0: the queue of units, its own slots, and the other ranks' requests.
class SweepRoot {
 public:
  SweepRoot(const DistributedSweep& sweep, const std::vector<Scenario>& scenarios, std::vector<Unit>& units,
            std::vector<std::size_t> queued, Slots& slots, int size)
      : sweep_(sweep), scenarios_(scenarios), units_(units), slots_(slots), ranks_(static_cast<std::size_t>(size)),
        remaining_(scenarios.size(), 0), failed_(scenarios.size(), false) {
    for (std::size_t id : queued) {
      queue_.push_back(id);
      if (units_[id].seed) ++remaining_[units_[id].scenario];
    }
    for (auto& r : ranks_) r.last_heard = now_s();
  }

  // Runs the sweep to the end (or to a stop); returns the number of failed runs.
  void run() {
    bool forwarded = false;
    while (!queue_.empty() || in_flight_ > 0) {
      bool busy = receive();
      if (auto done = slots_.reap()) {
        finish(done->first, done->second, 0);
        busy = true;
      }
      give_up_silent_ranks();
      if (sweep_stop_requested() && !forwarded) {
        slots_.forward_stop();
        forwarded = true;
      }
      if (sweep_stop_requested() && in_flight_ == 0) break;
      busy = assign() || busy;
      if (!busy) nap();
    }
    // No run is going anywhere: every rank leaves. A rank given up may yet be alive (only slow) and
    // would wait for ever; one that is dead takes the message nowhere (the error is ignored).
    g_rank_lost = std::any_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return !r.alive; });
    for (std::size_t r = 1; r < ranks_.size(); ++r) {
      const int64_t leave[3] = {-1, g_rank_lost ? 1 : 0, 0};
      const int rc = MPI_Send(leave, 3, MPI_INT64_T, static_cast<int>(r), kToWorker, MPI_COMM_WORLD);
      if (ranks_[r].alive) check(rc, "MPI_Send");
    }
  }
  std::size_t failed() const { return failed_runs_; }
  std::size_t stopped() const { return stopped_runs_; }
  std::size_t not_started() const { return queue_.size(); }

 private:
  struct RankState {
    bool alive = true;
    std::size_t requests = 0;  // free slots it asked to fill
    std::size_t running = 0;   // units it holds
    double last_heard = 0;
  };

  std::string label(const Unit& u) const {
    const std::string& name = scenarios_[u.scenario].name;
    return u.seed ? fmt::format("{} seed {}", name, *u.seed) : name + " summary";
  }
  void say(const std::string& line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);  // progress lines reach a log or pipe as they happen
  }

  bool receive() {
    bool any = false;
    for (;;) {
      int flag = 0;
      MPI_Status st;
      check(MPI_Iprobe(MPI_ANY_SOURCE, kToRoot, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
      if (!flag) return any;
      int64_t msg[3];
      check(MPI_Recv(msg, 3, MPI_INT64_T, st.MPI_SOURCE, kToRoot, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
      any = true;
      RankState& r = ranks_[static_cast<std::size_t>(st.MPI_SOURCE)];
      if (!r.alive) continue;  // given up already: its units run elsewhere
      r.last_heard = now_s();
      if (msg[0] == kRequest) ++r.requests;
      if (msg[0] == kFinished) {
        ++r.requests;
        finish(msg[1], static_cast<ChildEnd>(msg[2]), st.MPI_SOURCE);
      }
    }
  }

  void finish(int64_t id, ChildEnd end, int rank) {
    Unit& u = units_[static_cast<std::size_t>(id)];
    if (u.rank != rank) return;  // a late report of a unit given to another rank since
    u.rank = -1;
    --in_flight_;
    --ranks_[static_cast<std::size_t>(rank)].running;
    const std::string where = fmt::format("rank {}", rank);
    switch (end) {
      case ChildEnd::kFinished:
        say(fmt::format("{:<48} finished on {} in {:.1f} s", label(u), where, now_s() - u.started_s));
        if (const std::size_t sc = u.scenario; u.seed && --remaining_[sc] == 0 && !failed_[sc]) {
          units_.push_back({sc, std::nullopt});  // u dangles from here
          queue_.push_front(units_.size() - 1);  // the summary run first: it frees the scenario
        }
        break;
      case ChildEnd::kStopped:
        ++stopped_runs_;
        say(fmt::format("{:<48} stopped on {} (re-run the sweep to resume it)", label(u), where));
        break;
      case ChildEnd::kKilled:
        requeue(static_cast<std::size_t>(id), fmt::format("its process on {} was killed", where));
        break;
      case ChildEnd::kFailed:
        ++failed_runs_;
        failed_[u.scenario] = true;
        say(fmt::format("{:<48} FAILED on {} (see {})", label(u), where, slots_.log_of(u).string()));
        break;
    }
  }

  void requeue(std::size_t id, const std::string& why) {
    Unit& u = units_[id];
    if (++u.attempts >= kMaxAttempts) {
      ++failed_runs_;
      failed_[u.scenario] = true;
      say(fmt::format("{:<48} FAILED: {}, {} times", label(u), why, u.attempts));
      return;
    }
    say(fmt::format("{:<48} {}: run again", label(u), why));
    queue_.push_front(id);
  }

  // A rank that holds runs and has not been heard of for rank_timeout_s died (or hangs): its runs
  // go back to the queue, and it gets no more.
  void give_up_silent_ranks() {
    for (std::size_t r = 1; r < ranks_.size(); ++r) {
      RankState& rs = ranks_[r];
      if (!rs.alive || rs.running == 0 || now_s() - rs.last_heard < sweep_.rank_timeout_s) continue;
      rs.alive = false;
      say(fmt::format("rank {} silent for {:.0f} s: given up", r, now_s() - rs.last_heard));
      for (std::size_t id = 0; id < units_.size(); ++id)
        if (units_[id].rank == static_cast<int>(r)) {
          units_[id].rank = -1;
          --in_flight_;
          requeue(id, fmt::format("rank {} was lost", r));
        }
      rs.running = 0;
    }
  }

  bool assign() {
    bool any = false;
    while (!sweep_stop_requested() && !queue_.empty()) {
      const int rank = free_rank();
      if (rank < 0) break;
      const std::size_t id = queue_.front();
      queue_.pop_front();
      Unit& u = units_[id];
      u.rank = rank;
      u.started_s = now_s();
      ++in_flight_;
      RankState& rs = ranks_[static_cast<std::size_t>(rank)];
      ++rs.running;
      say(fmt::format("{:<48} started on rank {} (log: {})", label(u), rank, slots_.log_of(u).string()));
      if (rank == 0) {
        slots_.start(static_cast<int64_t>(id), u);
      } else {
        --rs.requests;
        rs.last_heard = now_s();  // its silence counts from now
        const int64_t msg[3] = {static_cast<int64_t>(id), static_cast<int64_t>(u.scenario),
                                static_cast<int64_t>(u.seed.value_or(0))};
        check(MPI_Send(msg, 3, MPI_INT64_T, rank, kToWorker, MPI_COMM_WORLD), "MPI_Send");
      }
      any = true;
    }
    return any;
  }

  // Rank 0 first while it has a free slot (no message needed), then the others in order.
  int free_rank() const {
    if (slots_.running() < static_cast<std::size_t>(sweep_.jobs)) return 0;
    for (std::size_t r = 1; r < ranks_.size(); ++r)
      if (ranks_[r].alive && ranks_[r].requests > 0) return static_cast<int>(r);
    return -1;
  }

  const DistributedSweep& sweep_;
  const std::vector<Scenario>& scenarios_;
  std::vector<Unit>& units_;
  Slots& slots_;
  std::vector<RankState> ranks_;
  std::deque<std::size_t> queue_;
  std::vector<std::size_t> remaining_;  // per scenario: seed units not yet finished
  std::vector<bool> failed_;            // per scenario: a unit failed; no summary run
  std::size_t in_flight_ = 0, failed_runs_ = 0, stopped_runs_ = 0;
};

}  // namespace

void run_sweep_distributed(const DistributedSweep& sweep) {
  const MpiWorld w = mpi_world();
  if (sweep.jobs < 1) fail_everywhere(w, "--jobs " + std::to_string(sweep.jobs) + ": must be >= 1");
  std::vector<Scenario> scenarios;
  std::string error;
  try {
    scenarios = read_sweep({sweep.files.begin(), sweep.files.end()}, sweep.name);  // all validated before anything runs
  } catch (const InputError& e) {
    error = e.what();
  }
  if (!all_ranks_ok(w, error)) fail_agreed(w, error);

  // The units, in the same order on every rank: a scenario's seeds, scenario by scenario.
  std::vector<Unit> units;
  std::vector<std::size_t> queued;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    const std::vector<uint64_t> seeds = sweep_seeds(scenarios[i], sweep.seeds);
    const bool finished = w.rank == 0 && scenario_finished(scenarios[i], seeds);
    if (finished) fmt::print("{:<48} already finished, skipped\n", scenarios[i].name);
    for (uint64_t seed : seeds) {
      units.push_back({i, seed});
      if (!finished) queued.push_back(units.size() - 1);
    }
  }
  const fs::path dir = fs::path("results") / ("sweep-" + sweep.name);
  if (w.rank == 0) {
    std::error_code made;
    fs::create_directories(dir / "logs", made);
    if (made) throw InputError(dir.string() + ": cannot create the sweep's folder: " + made.message());
    fmt::print("sweep {}: {} scenario(s), {} run(s) on {} rank(s) × {} job(s)\n", sweep.name, scenarios.size(),
               queued.size(), w.size, sweep.jobs);
    std::fflush(stdout);
  }
  catch_sweep_stop_signals();
  Slots slots(sweep, scenarios, dir / "logs");
  if (w.rank != 0) return sweep_worker(sweep, slots);

  SweepRoot root(sweep, scenarios, units, queued, slots, w.size);
  root.run();
  write_sweep_tables(dir, sweep.name, scenarios);
  if (root.failed())
    throw Error(std::to_string(root.failed()) + " run(s) failed; their logs are in " + (dir / "logs").string());
  if (sweep_stop_requested() || root.stopped()) {
    std::fflush(stdout);  // the table first, then why it is partial
    fmt::print(stderr, "sweep stopped: {} run(s) stopped, {} not started; the same command resumes it\n", root.stopped(),
               root.not_started());
    throw Stopped{};
  }
}

// --------------------------------------------------------------------------------------------
// Distributed sample evaluation.

namespace {

// Rank 0 → all (MPI_Bcast): {command, placements, ops}.
enum Command : int64_t { kEvaluate = 1, kVerify = 2, kDone = 3 };
enum RunTag : int { kVerifyPlacements = 21, kVerifyResults = 22, kVerifySource = 23 };

// Placement i of n goes to rank r when r·n/size ≤ i < (r+1)·n/size: contiguous shares that differ
// by at most one.
std::size_t share_begin(std::size_t n, int rank, int size) {
  return n * static_cast<std::size_t>(rank) / static_cast<std::size_t>(size);
}

// Every rank's share of a batch of n items of `per_item` values each, as MPI_Scatterv and
// MPI_Gatherv count them; rank 0's own share is counted 0 (it keeps it rather than sending it).
void count_shares(std::size_t n, std::size_t per_item, int size, std::vector<int>& counts, std::vector<int>& displs) {
  counts.assign(static_cast<std::size_t>(size), 0);
  displs.assign(static_cast<std::size_t>(size), 0);
  for (int r = 1; r < size; ++r) {
    const std::size_t b = share_begin(n, r, size), e = share_begin(n, r + 1, size);
    counts[static_cast<std::size_t>(r)] = static_cast<int>((e - b) * per_item);
    displs[static_cast<std::size_t>(r)] = static_cast<int>(b * per_item);
  }
}

// Placements as one array of device ids, and back: what travels between ranks.
std::vector<DeviceId> flatten(std::span<const Placement> placements) {
  std::vector<DeviceId> flat;
  for (const Placement& p : placements) flat.insert(flat.end(), p.begin(), p.end());
  return flat;
}
std::vector<Placement> unflatten(const std::vector<DeviceId>& flat, std::size_t ops) {
  std::vector<Placement> out;
  for (std::size_t i = 0; i + ops <= flat.size() && ops > 0; i += ops)
    out.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(i), flat.begin() + static_cast<std::ptrdiff_t>(i + ops));
  return out;
}

// Evaluates the share of one batch on this rank; rank 0 passes the batch, the others receive it.
// Results: {step time, oom} per placement, gathered on rank 0 in order.
void evaluate_share(const MpiWorld& w, SimEnvironment& local, std::size_t n, std::size_t ops,
                    std::span<const Placement> batch, std::vector<double>& gathered) {
  std::vector<int> counts, displs;
  count_shares(n, ops, w.size, counts, displs);
  const std::size_t share = share_begin(n, w.rank + 1, w.size) - share_begin(n, w.rank, w.size);
  const std::vector<DeviceId> flat = w.rank == 0 ? flatten(batch) : std::vector<DeviceId>{};
  std::vector<DeviceId> received(w.rank == 0 ? 0 : share * ops);
  check(MPI_Scatterv(flat.data(), counts.data(), displs.data(), MPI_UINT16_T, received.data(),
                     static_cast<int>(received.size()), MPI_UINT16_T, 0, MPI_COMM_WORLD),
        "MPI_Scatterv");
  // Rank 0's share is the head of its own batch; the others' came in the message.
  const std::vector<Placement> mine = unflatten(received, ops);
  const std::span<const Placement> to_simulate = w.rank == 0 ? batch.first(share) : std::span<const Placement>(mine);
  std::vector<double> out;
  for (const Measurement& m : local.evaluate(to_simulate)) out.insert(out.end(), {m.step_time_s, m.oom ? 1.0 : 0.0});
  count_shares(n, 2, w.size, counts, displs);
  if (w.rank == 0) gathered.assign(2 * n, 0.0);
  check(MPI_Gatherv(w.rank == 0 ? nullptr : out.data(), w.rank == 0 ? 0 : static_cast<int>(out.size()), MPI_DOUBLE,
                    gathered.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD),
        "MPI_Gatherv");
  if (w.rank == 0) std::copy(out.begin(), out.end(), gathered.begin());  // rank 0's share is first
}

// Waits for a nonblocking operation by polling: a blocking wait would spin this core. The sleeps
// grow from 20 µs to 2 ms, so that a quick answer (rank 0's next batch) costs little latency and
// a long wait (rank 0 training, another rank calibrating) little CPU.
void wait_polling(MPI_Request& req) {
  for (int i = 0;; ++i) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(2000, 20 << std::min(i, 7))));
  }
}

// The command header, broadcast nonblocking on every side (MPI matches a nonblocking collective
// only with nonblocking ones): the ranks wait for it polling while rank 0 trains.
void command_broadcast(int64_t (&header)[3]) {
  MPI_Request req;
  check(MPI_Ibcast(header, 3, MPI_INT64_T, 0, MPI_COMM_WORLD, &req), "MPI_Ibcast");
  wait_polling(req);
}

void broadcast_command(int64_t command, std::size_t n, std::size_t ops) {
  int64_t header[3] = {command, static_cast<int64_t>(n), static_cast<int64_t>(ops)};
  command_broadcast(header);
}

// Verification on the verify rank: placements in, {time, oom, predicted} and the source out.
std::vector<Measurement> verify_remote(int verify_rank, std::span<const Placement> placements) {
  const std::vector<DeviceId> flat = flatten(placements);
  check(MPI_Send(flat.data(), static_cast<int>(flat.size()), MPI_UINT16_T, verify_rank, kVerifyPlacements, MPI_COMM_WORLD),
        "MPI_Send");
  std::vector<double> res(3 * placements.size());
  MPI_Request req;
  check(MPI_Irecv(res.data(), static_cast<int>(res.size()), MPI_DOUBLE, verify_rank, kVerifyResults, MPI_COMM_WORLD, &req),
        "MPI_Irecv");
  wait_polling(req);  // measuring takes long
  char source[64] = {};
  check(MPI_Recv(source, sizeof source - 1, MPI_CHAR, verify_rank, kVerifySource, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Recv");
  std::vector<Measurement> out;
  for (std::size_t i = 0; i < placements.size(); ++i)
    out.push_back({res[3 * i], res[3 * i + 1] != 0, source,
                   res[3 * i + 2] != 0 ? std::optional<double>(res[3 * i + 2]) : std::nullopt});
  return out;
}

// Rank 0's view of the ranks: evaluate() spreads a batch over them.
class DistributedSimEnvironment : public Environment {
 public:
  DistributedSimEnvironment(const MpiWorld& w, const Simulator& sim, std::size_t num_devices)
      : w_(w), sim_(sim), local_(sim, 1), num_devices_(num_devices) {}
  ~DistributedSimEnvironment() override {
    try {
      broadcast_command(kDone, 0, 0);
      g_agreed_error = true;  // the ranks are released: an error now on rank 0 ends the job cleanly
    } catch (const std::exception&) {
      // Ending the job is all that is left; the ranks' launcher sees rank 0 exit.
    }
  }
  std::vector<Measurement> evaluate(std::span<const Placement> placements) override {
    const std::size_t ops = sim_.num_ops();
    for (const Placement& p : placements) check_placement(p, ops, num_devices_, "placement");  // before the ranks see it
    broadcast_command(kEvaluate, placements.size(), ops);
    std::vector<double> gathered;
    evaluate_share(w_, local_, placements.size(), ops, placements, gathered);
    std::vector<Measurement> out;
    out.reserve(placements.size());
    for (std::size_t i = 0; i < placements.size(); ++i) out.push_back({gathered[2 * i], gathered[2 * i + 1] != 0, "sim"});
    return out;
  }
  std::string name() const override { return "sim"; }

 private:
  MpiWorld w_;
  const Simulator& sim_;
  SimEnvironment local_;
  std::size_t num_devices_;
};

// Rank 0's handle on the verify rank's environment.
class RemoteVerifyEnvironment : public Environment {
 public:
  RemoteVerifyEnvironment(int rank, std::size_t ops, std::string name) : rank_(rank), ops_(ops), name_(std::move(name)) {}
  std::vector<Measurement> evaluate(std::span<const Placement> placements) override {
    broadcast_command(kVerify, placements.size(), ops_);
    return verify_remote(rank_, placements);
  }
  std::string name() const override { return name_; }

 private:
  int rank_;
  std::size_t ops_;
  std::string name_;
};

// Ranks other than 0: evaluate shares until rank 0 is done. Stop signals are rank 0's to act on.
void serve_samples(const MpiWorld& w, const Simulator& sim, Environment* verify) {
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  SimEnvironment local(sim, 1);
  std::vector<double> unused;
  for (;;) {
    int64_t header[3] = {0, 0, 0};
    command_broadcast(header);
    const auto n = static_cast<std::size_t>(header[1]), ops = static_cast<std::size_t>(header[2]);
    if (header[0] == kDone) return;
    if (header[0] == kEvaluate) evaluate_share(w, local, n, ops, {}, unused);
    if (header[0] == kVerify && verify) {
      std::vector<DeviceId> flat(n * ops);
      check(MPI_Recv(flat.data(), static_cast<int>(flat.size()), MPI_UINT16_T, 0, kVerifyPlacements, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE),
            "MPI_Recv");
      std::vector<double> res;
      std::string source = "?";
      for (const Measurement& m : verify->evaluate(unflatten(flat, ops))) {
        res.insert(res.end(), {m.step_time_s, m.oom ? 1.0 : 0.0, m.predicted_s.value_or(0.0)});  // 0: none
        source = m.source;
      }
      check(MPI_Send(res.data(), static_cast<int>(res.size()), MPI_DOUBLE, 0, kVerifyResults, MPI_COMM_WORLD), "MPI_Send");
      source.resize(std::min<std::size_t>(source.size(), 62));
      check(MPI_Send(source.data(), static_cast<int>(source.size()), MPI_CHAR, 0, kVerifySource, MPI_COMM_WORLD), "MPI_Send");
    }
  }
}

}  // namespace

RunOutcome run_scenario_distributed(const Scenario& s, RunOptions options, int verify_rank) {
  const MpiWorld w = mpi_world();
  if (verify_rank < 0 || verify_rank >= w.size)
    fail_everywhere(w, fmt::format("--verify-rank {}: must be a rank of this job, 0 to {}", verify_rank, w.size - 1));
  if (w.size == 1) return run_scenario(s, options);

  if (w.rank != 0) {
    // Every rank holds the scenario's simulator; the verify rank its verification too.
    std::string error;
    std::optional<GraphSource> src;
    std::unique_ptr<MachineSource> ms;
    std::unique_ptr<Simulator> sim;
    std::unique_ptr<Environment> verify;
    try {
      src.emplace(load_graph_source(s.graph.string(), s.model));
      ms = load_machine_source(s.machine);
      sim = std::make_unique<Simulator>(src->graph, *ms->cost);
      if (w.rank == verify_rank) verify = make_verify_environment(s, src->graph, *ms);
    } catch (const InputError& e) {
      error = e.what();
    }
    if (!all_ranks_ok(w, error)) fail_agreed(w, error);
    serve_samples(w, *sim, verify.get());
    return {};
  }

  bool agreed = false;  // rank 0 has told the others whether it could start
  std::size_t ops = 0;
  options.sample_environment = [&](const Simulator& sim) -> std::unique_ptr<Environment> {
    agreed = true;
    if (!all_ranks_ok(w, "")) fail_agreed(w, "");
    ops = sim.num_ops();
    return std::make_unique<DistributedSimEnvironment>(w, sim, sim.machine().num_devices());
  };
  if (verify_rank != 0 && !s.verify.backend.empty()) {
    options.verify_environment = [&]() -> std::unique_ptr<Environment> {
      return std::make_unique<RemoteVerifyEnvironment>(verify_rank, ops, s.verify.backend);
    };
  }
  try {
    return run_scenario(s, options);
  } catch (const InputError& e) {
    if (!agreed) {
      agreed = true;
      all_ranks_ok(w, e.what());  // the others wait for this verdict before serving
    }
    throw;
  }
}

// --------------------------------------------------------------------------------------------
// Cluster calibration.

namespace {

// A barrier that waits by polling: a rank waiting for its host's turn must not spin the core the
// calibrating rank is timing.
void barrier_polling(MPI_Comm comm) {
  MPI_Request req;
  check(MPI_Ibarrier(comm, &req), "MPI_Ibarrier");
  wait_polling(req);
}

// The names of the nodes, one per rank: the host name, or `<host>-rank<N>` where ranks share a
// host (so that two ranks of one machine still make two nodes).
std::vector<std::string> node_names(const MpiWorld& w) {
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  check(MPI_Get_processor_name(mine, &len), "MPI_Get_processor_name");
  std::vector<char> all(static_cast<std::size_t>(w.size) * MPI_MAX_PROCESSOR_NAME);
  check(MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD),
        "MPI_Allgather");
  std::vector<std::string> hosts, names;
  for (int r = 0; r < w.size; ++r) {
    std::string h(all.data() + static_cast<std::ptrdiff_t>(r) * MPI_MAX_PROCESSOR_NAME);
    std::replace(h.begin(), h.end(), '/', '_');  // a node name holds no '/'
    hosts.push_back(h.empty() ? "node" : h);
  }
  for (int r = 0; r < w.size; ++r) {
    const auto n = std::count(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(r)]);
    names.push_back(n > 1 ? fmt::format("{}-rank{}", hosts[static_cast<std::size_t>(r)], r) : hosts[static_cast<std::size_t>(r)]);
  }
  return names;
}

// One-way seconds for messages of each size between rank 0 and `peer`: the median of timed round
// trips, halved. Every rank calls it; only 0 and `peer` exchange messages.
std::vector<FitSample> ping_pong(const MpiWorld& w, int peer) {
  static constexpr std::size_t kSizes[] = {8, 64, 512, 4096, 32768, 262144, 2097152, 16777216};
  std::vector<FitSample> samples;
  if (w.rank != 0 && w.rank != peer) return samples;
  std::vector<char> buf(kSizes[std::size(kSizes) - 1]);
  for (std::size_t bytes : kSizes) {
    // Enough round trips for a stable median (more for small messages), two of them warm-up.
    const int reps = static_cast<int>(std::clamp<std::size_t>((std::size_t{64} << 20) / bytes, 8, 200));
    std::vector<double> trips;
    for (int i = 0; i < reps + 2; ++i) {
      const int n = static_cast<int>(bytes);
      if (w.rank == 0) {
        const double t0 = MPI_Wtime();
        check(MPI_Send(buf.data(), n, MPI_CHAR, peer, 31, MPI_COMM_WORLD), "MPI_Send");
        check(MPI_Recv(buf.data(), n, MPI_CHAR, peer, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        if (i >= 2) trips.push_back(MPI_Wtime() - t0);
      } else {
        check(MPI_Recv(buf.data(), n, MPI_CHAR, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        check(MPI_Send(buf.data(), n, MPI_CHAR, 0, 32, MPI_COMM_WORLD), "MPI_Send");
      }
    }
    if (w.rank != 0) continue;
    samples.push_back({0, static_cast<double>(bytes), median(std::move(trips)) / 2});
  }
  return samples;
}

// A node's calibrated machine as text, to rank 0 (length, then the bytes).
void send_text(const std::string& text, int to) {
  const int64_t n = static_cast<int64_t>(text.size());
  check(MPI_Send(&n, 1, MPI_INT64_T, to, 41, MPI_COMM_WORLD), "MPI_Send");
  check(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, 42, MPI_COMM_WORLD), "MPI_Send");
}
std::string receive_text(int from) {
  int64_t n = 0;
  check(MPI_Recv(&n, 1, MPI_INT64_T, from, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  std::string text(static_cast<std::size_t>(n), '\0');
  check(MPI_Recv(text.data(), static_cast<int>(n), MPI_CHAR, from, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  return text;
}

}  // namespace

std::optional<CalibratedMachine> calibrate_cluster(const std::function<CalibratedMachine()>& measure, const fs::path& out) {
  const MpiWorld w = mpi_world();
  const std::vector<std::string> names = node_names(w);

  // Each node measured, ranks of one host in turn (the others wait without spinning).
  MPI_Comm host;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
  int host_rank = 0, host_size = 1;
  MPI_Comm_rank(host, &host_rank);
  MPI_Comm_size(host, &host_size);
  std::optional<CalibratedMachine> mine;
  std::string error;
  for (int turn = 0; turn < host_size; ++turn) {
    if (turn == host_rank) {
      fmt::print(stderr, "rank {} ({}): calibrating\n", w.rank, names[static_cast<std::size_t>(w.rank)]);
      try {
        mine = measure();
      } catch (const InputError& e) {
        error = e.what();
      }
    }
    barrier_polling(host);
  }
  MPI_Comm_free(&host);
  if (!all_ranks_ok(w, error)) fail_agreed(w, error);

  // The network: rank 0 to every other rank, one pair at a time.
  std::vector<CopyFit> links;
  for (int peer = 1; peer < w.size; ++peer) {
    const std::vector<FitSample> samples = ping_pong(w, peer);
    if (w.rank == 0) {
      links.push_back(fit_copy(samples));
      fmt::print("network {} <-> {}: {:.2f} us + bytes / {:.2f} GB/s (ping-pong, {} sizes)\n", names[0],
                 names[static_cast<std::size_t>(peer)], links.back().latency_s * 1e6, links.back().bandwidth_Bps / 1e9,
                 samples.size());
    }
    barrier_polling(MPI_COMM_WORLD);
  }

  if (w.rank != 0) {
    send_text(machine_yaml(mine->machine, true) + calibration_yaml(mine->calibration), 0);
    return std::nullopt;
  }
  std::vector<ClusterNode> nodes;
  std::vector<ClusterCalibrationNode> calibrations;
  for (int r = 0; r < w.size; ++r) {
    CalibratedMachine m = r == 0 ? std::move(*mine)
                                 : parse_calibrated_machine_yaml(receive_text(r), fmt::format("rank {}'s calibration", r));
    nodes.push_back({names[static_cast<std::size_t>(r)], std::move(m.machine)});
    calibrations.push_back({names[static_cast<std::size_t>(r)], std::move(m.calibration)});
  }
  std::vector<double> latencies, bandwidths;
  for (const CopyFit& f : links) latencies.push_back(f.latency_s), bandwidths.push_back(f.bandwidth_Bps);
  NetworkSpec net;
  net.latency_s = median(latencies);
  net.bandwidth_Bps = median(bandwidths);
  CalibratedMachine cluster{compose_cluster(out.stem().string(), nodes, net), compose_cluster_calibration(calibrations)};
  cluster.machine.description = fmt::format(
      "{} node(s) calibrated under mpirun, joined by the measured network: {:.2f} us + bytes / {:.2f} GB/s "
      "(medians of rank 0's ping-pong to each other rank)",
      w.size, net.latency_s * 1e6, net.bandwidth_Bps / 1e9);
  write_calibrated_machine(out, cluster.machine, cluster.calibration);
  return cluster;
}

}  // namespace placelab::cli
