#include "placelab/learners/grouping.h"

#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "placelab/graph/error.h"

namespace placelab {
namespace {

// Adds an op with a name, optional colocation key and layer.
OpId add(OpGraph& g, const std::string& name, const std::string& coloc = "", int layer = -1, double flops = 1e6) {
  return g.add_op({.name = name, .type = "Op", .flops = flops, .output_bytes = 1024, .layer = layer, .colocation = coloc});
}

// prefix + number; spelled with a stream because GCC 12 warns (-Wrestrict, a known false
// positive) on `"literal" + std::to_string(i)` once inlined.
std::string numbered(const char* prefix, int i) {
  std::ostringstream out;
  out << prefix << i;
  return out.str();
}

// Sets of op names per group, for order-free comparison.
std::set<std::set<std::string>> groups_of(const OpGraph& g, const Grouping& grouping) {
  std::set<std::set<std::string>> out;
  for (const auto& members : grouping.members()) {
    std::set<std::string> names;
    for (OpId op : members) names.insert(g.op(op).name);
    out.insert(names);
  }
  return out;
}

void expect_colocation_kept(const OpGraph& g, const Grouping& grouping) {
  std::map<std::string, GroupId> group_of_key;
  for (OpId op = 0; op < g.num_ops(); ++op) {
    const std::string& key = g.op(op).colocation;
    if (key.empty()) continue;
    auto [it, inserted] = group_of_key.emplace(key, grouping.group_of(op));
    EXPECT_EQ(it->second, grouping.group_of(op)) << "colocation key " << key << " split at op " << g.op(op).name;
  }
}

TEST(Grouping, NumbersGroupsByFirstOpAndExpands) {
  const Grouping g(std::vector<GroupId>{7, 3, 7, 9, 3});
  EXPECT_EQ(g.num_groups(), 3u);
  EXPECT_EQ(std::vector<GroupId>(g.group_of_op().begin(), g.group_of_op().end()), (std::vector<GroupId>{0, 1, 0, 2, 1}));
  const Placement ops = g.expand(Placement{4, 1, 2});
  EXPECT_EQ(ops, (Placement{4, 1, 4, 2, 1}));
  EXPECT_EQ(g.contract(ops), (Placement{4, 1, 2}));
  EXPECT_THROW(g.contract(Placement{4, 1, 3, 2, 1}), Error);
}

TEST(Grouping, ColocationGroupsShareKeys) {
  OpGraph g;
  add(g, "w", "var_w");
  add(g, "read", "var_w");
  add(g, "matmul");
  add(g, "apply", "var_w");
  add(g, "relu");
  const Grouping grouping = group_by_colocation(g);
  EXPECT_EQ(groups_of(g, grouping),
            (std::set<std::set<std::string>>{{"w", "read", "apply"}, {"matmul"}, {"relu"}}));
}

TEST(Grouping, SingleConsumerMergesChainsByHand) {
  // a → b → c → {d, e}; f → d; g (coloc with a) → e. By hand:
  //  b's only consumer is c: merge; {a, g}: a's consumer is b∪c, g's is e — two groups, no merge;
  //  {b, c} feeds d and e: no merge; f's only consumer is d: merge {f, d}; d, e are sinks.
  OpGraph g;
  const OpId a = add(g, "a", "k"), b = add(g, "b"), c = add(g, "c"), d = add(g, "d"), e = add(g, "e"), f = add(g, "f"),
             x = add(g, "g", "k");
  g.add_edge(a, b, {.bytes = 4});
  g.add_edge(b, c, {.bytes = 4});
  g.add_edge(c, d, {.bytes = 4});
  g.add_edge(c, e, {.bytes = 4});
  g.add_edge(f, d, {.bytes = 4});
  g.add_edge(x, e, {.bytes = 4});
  const Grouping grouping = group_by_single_consumer(g);
  EXPECT_EQ(groups_of(g, grouping),
            (std::set<std::set<std::string>>{{"a", "g"}, {"b", "c"}, {"d", "f"}, {"e"}}));
  expect_colocation_kept(g, grouping);
}

TEST(Grouping, SingleConsumerMergesRepeatedlyAndIgnoresControlEdges) {
  // A chain p0 → p1 → … → p9 collapses into one group; a control edge p9 ⇢ q does not count.
  OpGraph g;
  std::vector<OpId> p;
  for (int i = 0; i < 10; ++i) p.push_back(add(g, numbered("p", i)));
  for (int i = 0; i + 1 < 10; ++i) g.add_edge(p[i], p[i + 1], {.bytes = 8});
  const OpId q = add(g, "q");
  g.add_edge(p[9], q, {.control = true});
  const Grouping grouping = group_by_single_consumer(g);
  EXPECT_EQ(grouping.num_groups(), 2u);
  EXPECT_NE(grouping.group_of(p[9]), grouping.group_of(q));
}

TEST(Grouping, NamePrefixTwoLevels) {
  OpGraph g;
  add(g, "tower/conv1/Conv2D");
  add(g, "tower/conv1/Relu");
  add(g, "tower/conv1/inner/BiasAdd");
  add(g, "tower/conv2/Conv2D");
  add(g, "conv3/Conv2D");
  add(g, "conv3/Relu");
  add(g, "loss");
  add(g, "conv3");  // a top-level op named like a scope stays alone
  add(g, "gradients/tower/conv1/Conv2D_grad", "tower/conv1");
  const Grouping grouping = group_by_name_prefix(g, 2);
  EXPECT_EQ(groups_of(g, grouping), (std::set<std::set<std::string>>{
                                        {"tower/conv1/Conv2D", "tower/conv1/Relu", "tower/conv1/inner/BiasAdd"},
                                        {"tower/conv2/Conv2D"},
                                        {"conv3/Conv2D", "conv3/Relu"},
                                        {"loss"},
                                        {"conv3"},
                                        {"gradients/tower/conv1/Conv2D_grad"}}));
  // One level: everything under "tower" together.
  EXPECT_EQ(group_by_name_prefix(g, 1).num_groups(), 5u);
  EXPECT_THROW(group_by_name_prefix(g, 0), InputError);
}

TEST(Grouping, NamePrefixNeverSplitsColocation) {
  OpGraph g;
  add(g, "a/x", "key");
  add(g, "b/y", "key");
  add(g, "b/z");
  const Grouping grouping = group_by_name_prefix(g, 2);
  EXPECT_EQ(grouping.num_groups(), 1u);  // a/x joins b/y by key, and b/y shares scope b with b/z
}

TEST(Grouping, PerLayer) {
  OpGraph g;
  add(g, "l0a", "", 0);
  add(g, "l0b", "", 0);
  add(g, "l1a", "", 1);
  add(g, "none1");
  add(g, "none2", "c");
  add(g, "l1b", "c", 1);
  EXPECT_EQ(groups_of(g, group_by_layer(g)),
            (std::set<std::set<std::string>>{{"l0a", "l0b"}, {"l1a", "l1b", "none2"}, {"none1"}}));
}

TEST(Grouping, MetisRespectsColocationAndCount) {
  // Four parallel chains of 25 ops between a source and a sink; variables colocated across chains.
  OpGraph g;
  const OpId src = add(g, "src");
  const OpId sink = add(g, "sink");
  for (int c = 0; c < 4; ++c) {
    OpId prev = src;
    for (int i = 0; i < 25; ++i) {
      const std::string coloc = i == 3 ? numbered("shared", c % 2) : "";
      const OpId op = add(g, numbered("c", c) + numbered("/op", i), coloc);
      g.add_edge(prev, op, {.bytes = 1 << 20});
      prev = op;
    }
    g.add_edge(prev, sink, {.bytes = 1 << 20});
  }
  MetisGroupingOptions o;
  o.num_groups = 8;
  const Grouping grouping = group_by_metis(g, o);
  EXPECT_LE(grouping.num_groups(), 8u);
  EXPECT_GE(grouping.num_groups(), 4u);
  expect_colocation_kept(g, grouping);
  const Grouping again = group_by_metis(g, o);
  EXPECT_TRUE(std::equal(grouping.group_of_op().begin(), grouping.group_of_op().end(), again.group_of_op().begin()));
  o.num_groups = 0;
  EXPECT_THROW(group_by_metis(g, o), InputError);
  EXPECT_THROW(make_grouping(g, "bogus"), InputError);
  EXPECT_EQ(make_grouping(g, "none").num_groups(), g.num_ops());
}

}  // namespace
}  // namespace placelab
