// Private: the option tables' fields that every seq2seq learner shares — the policy's
// (Seq2SeqPolicyOptions) and grl's algorithm (GrlOptions, which the Hierarchical Planner reuses) —
// templates over the Options struct so each learner's OptionTable lists them once.
#pragma once

#include <vector>

#include "option_table.h"
#include "placelab/learners/seq2seq_learners.h"

namespace placelab::detail {

// The policy options every seq2seq learner takes (Seq2SeqPolicyOptions), for its OptionTable.
template <typename O>
std::vector<typename OptionTable<O>::Field> policy_fields() {
  return {
      {"placer", &O::placer, "",
       "the network: the seq2seq LSTM, or EAGLE's two graph convolutions over the group graph (every group decided "
       "at once; the scenario's groups only; reads hidden, temperature, tanh_constant, logit_noise, uniform_start)",
       {"seq2seq", "gcn"}},
      {"hidden", &O::hidden, "in [2, 4096] and even when bidirectional", "LSTM units of the encoder (split over both directions) and decoder"},
      {"layers", &O::layers, "in [1, 8]", "stacked LSTM layers in encoder and decoder"},
      {"bidirectional", &O::bidirectional, "", "the encoder reads the groups both ways"},
      {"attention", &O::attention, "", "content attention after the decoder LSTM (Mirhoseini), before it (EAGLE), or none",
       {"after", "before", "none"}},
      {"inputs", &O::inputs, "",
       "what the encoder reads per group: its features (op-type counts, output shapes, adjacency; docs/learners.md) "
       "or a learned embedding of its name (Spotlight)",
       {"features", "names"}},
      {"order", &O::order, "", "the order groups are read and placed in", {"topological", "id"}},
      {"temperature", &O::temperature, "> 0", "logits are divided by it"},
      {"tanh_constant", &O::tanh_constant, ">= 0", "logits bounded to C·tanh(logits/temperature); 0 = unbounded"},
      {"logit_noise", &O::logit_noise, ">= 0", "Gaussian logit noise while sampling, std = this × the logits' RMS; 0 = none"},
      {"noise_until", &O::noise_until, ">= 0", "samples after which sampling is noise-free"},
      {"forget_bias", &O::forget_bias, "in [-10, 10]", "initial forget-gate bias of every LSTM"},
      {"hp_memory_pairing", &O::hp_memory_pairing, "",
       "attention memory as the Hierarchical Planner's code builds it (forward state i with backward state N-1-i)"},
      {"uniform_start", &O::uniform_start, "", "zero output layer: every group starts uniform over the devices"},
  };
}

// A learner's own fields, then the policy's. Learners whose groups change with every placement
// (learned_groups = true: hierarchical, eagle) place them with the seq2seq placer only, so they do
// not offer `placer`.
template <typename O>
std::vector<typename OptionTable<O>::Field> with_policy(std::vector<typename OptionTable<O>::Field> own,
                                                        bool learned_groups = false) {
  for (auto& field : policy_fields<O>())
    if (!(learned_groups && field.key == "placer")) own.push_back(std::move(field));
  return own;
}

// A learned grouper's fields (LearnedGrouperFields); `groups_rule` and `groups_help` as the
// learner states what groups it takes.
template <typename O>
std::vector<typename OptionTable<O>::Field> grouper_fields(const char* groups_rule, const char* groups_help) {
  return {
      {"groups", &O::groups, groups_rule, groups_help},
      {"grouper_hidden", &O::grouper_hidden, "in [1, 4096]", "hidden units of the feed-forward grouper"},
      {"grouper_activation", &O::grouper_activation, "",
       "between the grouper's two layers; the papers name none, the HP code has none", {"relu", "tanh", "none"}},
  };
}

// grl's REINFORCE settings (GrlOptions).
template <typename O>
std::vector<typename OptionTable<O>::Field> grl_fields() {
  return {
      {"samples_per_update", &O::samples_per_update, "in [1, 1024]", "K placements per REINFORCE update"},
      {"learning_rate", &O::learning_rate, "> 0", "Adam's step size before decay"},
      {"lr_decay", &O::lr_decay, "in (0, 1]", "learning rate × this every lr_decay_every samples ..."},
      {"lr_decay_every", &O::lr_decay_every, ">= 1", "... (staircase) ..."},
      {"lr_decay_after", &O::lr_decay_after, ">= 0", "... once this many samples are drawn"},
      {"adam_beta1", &O::adam_beta1, "in [0, 1)", "Adam's first-moment decay"},
      {"adam_beta2", &O::adam_beta2, "in [0, 1)", "Adam's second-moment decay"},
      {"adam_epsilon", &O::adam_epsilon, "> 0", "Adam's epsilon"},
      {"grad_clip", &O::grad_clip, ">= 0", "global gradient-norm bound; 0 = none"},
      {"baseline_decay", &O::baseline_decay, "in [0, 1)", "B <- decay*B + (1-decay)*sqrt(T) per sample"},
      {"failing_signal", &O::failing_signal, "> 0", "sqrt(T) of an OOM placement; the baseline starts here"},
      {"feasible_only_after", &O::feasible_only_after, ">= 0",
       "samples after which only placements that ran update the policy and the baseline"},
  };
}

}  // namespace placelab::detail
