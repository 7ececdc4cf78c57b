// Private: the zoo's generators and the resolved options they read.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "placelab/models/builder.h"

namespace placelab::models::detail {

// The most nodes a zoo model is built with (a 1,000-layer NMT would otherwise build until memory is
// gone): make_model refuses a spec whose estimate exceeds it before building, and the builder
// stops at it whatever the estimate said. GNMT-8, the largest paper graph, has 43,884 ops.
inline constexpr std::size_t kMaxModelOps = 1'000'000;

// Every option of a model with its value, already validated by make_model.
struct GenOptions {
  std::map<std::string, std::string> values;
  int64_t integer(const std::string& key) const;
  const std::string& text(const std::string& key) const;
};

void build_cifar10_cnn(TrainingGraphBuilder& b, const GenOptions& o);
void build_resnet(TrainingGraphBuilder& b, const GenOptions& o, int depth);
void build_alexnet(TrainingGraphBuilder& b, const GenOptions& o);
void build_inception_v3(TrainingGraphBuilder& b, const GenOptions& o);
void build_rnnlm(TrainingGraphBuilder& b, const GenOptions& o);
void build_nmt(TrainingGraphBuilder& b, const GenOptions& o);
void build_gnmt(TrainingGraphBuilder& b, const GenOptions& o);
void build_bert(TrainingGraphBuilder& b, const GenOptions& o);

}  // namespace placelab::models::detail
