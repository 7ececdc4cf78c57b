#include "partition.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <metis.h>

#include "placelab/core/error.h"

namespace placelab::detail {

double op_flops(const Op& op) { return op.flops > 0 ? op.flops : kernel_flops(op.kernel); }

std::vector<int32_t> scale_weights(const std::vector<double>& weights, double max_total) {
  std::vector<int32_t> out(weights.size(), 1);
  if (weights.empty()) return out;
  double total = 0;
  for (double w : weights) total += std::max(0.0, w);
  if (total <= 0) return out;
  // Every weight gets at least 1 (METIS and Scotch treat 0 specially), so keep the scaled total
  // below max_total even after that floor is added to each entry.
  const double scale = (max_total - static_cast<double>(weights.size())) / total;
  for (std::size_t i = 0; i < weights.size(); ++i)
    out[i] = std::max<int32_t>(1, static_cast<int32_t>(std::llround(std::max(0.0, weights[i]) * scale)));
  return out;
}

namespace {

// METIS (GKlib's gk_sigtrap) installs its own handler for SIGTERM for the length of a call and
// answers the signal by abandoning the partition: a `timeout` or Ctrl-C during a grouping ended a
// run in "internal error: METIS_PartGraphKway failed with status -4" instead of stopping it at its
// checkpoint. Held blocked here, the signal waits until METIS has put placelab's handler back.
class HeldStopSignals {
 public:
  HeldStopSignals() {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &saved_);
  }
  ~HeldStopSignals() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  HeldStopSignals(const HeldStopSignals&) = delete;
  HeldStopSignals& operator=(const HeldStopSignals&) = delete;

 private:
  sigset_t saved_;
};

// Points file descriptor 1 at /dev/null for its lifetime. libmetis prints some notices with printf
// ("***Cannot bisect a graph with 0 vertices!", when its initial bisection leaves a part empty)
// and has no option to stop it; on standard output they would land in the middle of the CLI's
// tables and JSON. Not for threads writing to standard output meanwhile: the CLI partitions before
// it starts any. If the redirection cannot be made, output is left as it was.
class SilencedStdout {
 public:
  SilencedStdout() {
    std::fflush(stdout);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return;
    saved_ = ::dup(STDOUT_FILENO);
    if (saved_ >= 0 && ::dup2(null, STDOUT_FILENO) < 0) {
      ::close(saved_);
      saved_ = -1;
    }
    ::close(null);
  }
  ~SilencedStdout() {
    if (saved_ < 0) return;
    std::fflush(stdout);  // what libmetis left in stdio's buffer goes to /dev/null too
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  SilencedStdout(const SilencedStdout&) = delete;
  SilencedStdout& operator=(const SilencedStdout&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

bool trivial_partition(std::size_t n, int parts, std::vector<int32_t>& part) {
  part.assign(n, 0);
  if (n == 0 || parts <= 1) return true;
  if (static_cast<std::size_t>(parts) < n) return false;
  for (std::size_t i = 0; i < n; ++i) part[i] = static_cast<int32_t>(i);
  return true;
}

std::vector<int32_t> metis_partition(const WeightedGraph& g, int parts, int seed, double imbalance) {
  const std::size_t n = g.num_vertices();
  std::vector<int32_t> part;
  if (trivial_partition(n, parts, part)) return part;
  static_assert(sizeof(idx_t) == 4, "libmetis is expected with 32-bit idx_t (Debian's build)");
  // METIS sums vertex and edge weights internally in idx_t; 1e8 leaves a 20× margin below 2^31.
  std::vector<idx_t> vwgt = scale_weights(g.vertex_weight, 1e8);
  std::vector<idx_t> adjwgt = scale_weights(g.edge_weight, 1e8);
  std::vector<idx_t> xadj(n + 1);
  for (std::size_t i = 0; i <= n; ++i) xadj[i] = static_cast<idx_t>(g.offsets[i]);
  std::vector<idx_t> adjncy(g.neighbors.begin(), g.neighbors.end());
  idx_t nvtxs = static_cast<idx_t>(n), ncon = 1, nparts = parts, objval = 0;
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = seed;
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_UFACTOR] = static_cast<idx_t>(std::llround((imbalance - 1.0) * 1000.0));
  std::vector<idx_t> out(n, 0);
  // An edgeless graph makes METIS's k-way coarsening degenerate; it still returns METIS_OK. So
  // does a graph whose initial partitioning leaves parts empty: fewer parts come back than asked.
  int status = 0;
  {
    const HeldStopSignals held;
    SilencedStdout quiet;
    status = METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.empty() ? nullptr : adjncy.data(), vwgt.data(),
                                 nullptr, adjwgt.empty() ? nullptr : adjwgt.data(), &nparts, nullptr, nullptr, options,
                                 &objval, out.data());
  }
  if (status != METIS_OK)
    throw Error("METIS_PartGraphKway failed with status " + std::to_string(status) + " on " +
                std::to_string(n) + " vertices into " + std::to_string(parts) + " parts");
  for (std::size_t i = 0; i < n; ++i) part[i] = out[i];
  return part;
}

}  // namespace placelab::detail

namespace placelab::detail {

void scotch_check(int status, const char* call) {
  if (status != 0) throw Error(std::string(call) + " failed with status " + std::to_string(status));
}

ScotchWeightedGraph::ScotchWeightedGraph(const WeightedGraph& g)
    : velo(scale_weights(g.vertex_weight, 1e7)),
      edlo(scale_weights(g.edge_weight, 1e7)),
      verttab(g.offsets.begin(), g.offsets.end()),
      edgetab(g.neighbors.begin(), g.neighbors.end()) {
  const auto ne = static_cast<SCOTCH_Num>(edgetab.size());
  if (edgetab.empty()) {  // Scotch wants non-null arrays even for an edgeless graph
    edgetab.push_back(0);
    edlo.assign(1, 1);
  }
  scotch_check(SCOTCH_graphBuild(&graph.g, 0, static_cast<SCOTCH_Num>(g.num_vertices()), verttab.data(), nullptr,
                                 velo.data(), nullptr, ne, edgetab.data(), edlo.data()),
               "SCOTCH_graphBuild");
  scotch_check(SCOTCH_graphCheck(&graph.g), "SCOTCH_graphCheck");
}

ScotchContext::ScotchContext(int seed) {
  scotch_check(SCOTCH_contextInit(&c), "SCOTCH_contextInit");
  scotch_check(SCOTCH_contextOptionSetNum(&c, SCOTCH_OPTIONNUMDETERMINISTIC, 1), "SCOTCH_contextOptionSetNum");
  scotch_check(SCOTCH_contextOptionSetNum(&c, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1), "SCOTCH_contextOptionSetNum");
  scotch_check(SCOTCH_contextRandomClone(&c), "SCOTCH_contextRandomClone");
  SCOTCH_contextRandomSeed(&c, seed);
  scotch_check(SCOTCH_contextThreadSpawn(&c, 1, nullptr), "SCOTCH_contextThreadSpawn");
}

std::vector<int32_t> scotch_partition(const WeightedGraph& g, int parts, int seed, double imbalance) {
  const std::size_t n = g.num_vertices();
  std::vector<int32_t> part;
  if (trivial_partition(n, parts, part)) return part;
  const ScotchWeightedGraph graph(g);
  ScotchContext context(seed);
  ScotchGraph bound;
  scotch_check(SCOTCH_contextBindGraph(&context.c, &graph.graph.g, &bound.g), "SCOTCH_contextBindGraph");
  ScotchStrat strat;
  scotch_check(SCOTCH_stratGraphMapBuild(&strat.s, SCOTCH_STRATQUALITY, static_cast<SCOTCH_Num>(parts), imbalance - 1.0),
               "SCOTCH_stratGraphMapBuild");
  std::vector<SCOTCH_Num> out(n, -1);
  scotch_check(SCOTCH_graphPart(&bound.g, static_cast<SCOTCH_Num>(parts), &strat.s, out.data()), "SCOTCH_graphPart");
  for (std::size_t i = 0; i < n; ++i) {
    PLACELAB_CHECK(out[i] >= 0 && out[i] < parts) << "Scotch put vertex " << i << " in part " << out[i];
    part[i] = static_cast<int32_t>(out[i]);
  }
  return part;
}

}  // namespace placelab::detail
