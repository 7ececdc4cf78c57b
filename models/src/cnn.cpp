// CNN generators: the CIFAR-10 tutorial network, ResNet v1.5 and Inception-V3 (torchvision's
// layouts, whose parameter counts and multiply-adds are the published reference figures).
#include <string>

#include "generators.h"
#include "placelab/core/error.h"

namespace placelab::models::detail {
namespace {

// Conv (no bias) + batch norm (gamma and beta) + ReLU, in a name scope.
Value conv_bn(TrainingGraphBuilder& b, Value x, std::string_view name, int64_t filters, int64_t kh, int64_t kw,
              int64_t stride, int64_t pad_h, int64_t pad_w, bool relu = true, bool decay = false) {
  auto s = b.scope(name);
  Value w = b.variable("weights", {kh, kw, b.shape(x)[3], filters});
  if (decay) b.add_weight_decay(w, 4e-5);
  Value y = b.batch_norm(b.conv2d(x, w, stride, pad_h, pad_w), true);
  return relu ? b.relu(y) : y;
}

// Global average pooling, a dense classifier and the mean cross-entropy, in layer `name`.
Value classifier(TrainingGraphBuilder& b, Value x, Value labels, int64_t classes, int32_t layer, bool decay) {
  auto l = b.layer("logits", layer);
  const Shape s = b.shape(x);
  Value pooled = b.reshape(b.avg_pool(x, s[1], 1, 0), {s[0], s[3]});
  Value w = b.variable("weights", {s[3], classes});
  if (decay) b.add_weight_decay(w, 4e-5);
  Value logits = b.dense(pooled, w, b.variable("biases", {classes}));
  return b.softmax_cross_entropy(logits, labels);
}

}  // namespace

namespace {

// cifar10_input.distorted_inputs() as the queue-based tutorial built it (TF 1.0-1.x): a reader over
// the binary records, the random distortions of one image, and shuffle_batch's RandomShuffleQueue
// filled by 16 queue-runner threads; the step itself runs only the dequeue. Returns the queue's
// handle, for the dequeue.
//
// The producer ops run on the CPU concurrently with every step, and in the steady state they
// process as many images per step as the step consumes. So each TF op of the producer graph
// appears once, with the work of `n` images (its per-image work times n), cpu_only (the reader,
// queue and DecodeRaw ops have no GPU kernels, and cifar10_train.py pins distorted_inputs() to
// /cpu:0), and nothing in the step waits for it: the dequeue reads the queue's handle, not the
// enqueue. What this does not capture: TF launches each of these ops once per image (n times per
// step, on 16 threads), so their per-op overhead is n times what the graph charges.
Value distorted_inputs(TrainingGraphBuilder& b, int64_t n, int64_t side) {
  constexpr int64_t kSide = 32, kPixels = kSide * kSide * 3, kRecord = 1 + kPixels;  // label byte + image
  const int64_t crop = side * side * 3;
  const KernelSignature none = KernelSignature::noop();
  auto ew = [](int64_t elements, int64_t inputs) { return KernelSignature::elementwise(elements, inputs); };
  auto op = [&](std::string_view type, KernelSignature k, const std::vector<Value>& in, const Shape& out,
                int64_t element_bytes = 4) { return b.queue_runner_op(type, k, in, {out}, element_bytes)[0]; };
  // Shape arithmetic and control flow on a few integers per image: noop kernels, as the builder's
  // shape ops.
  auto small = [&](std::string_view type, const std::vector<Value>& in) { return op(type, none, in, {n, 3}); };
  // random_ops.random_uniform of a float scalar per image: RandomUniform, mul, add.
  auto random_scalar = [&] {
    return op("add", ew(n, 1), {op("mul", ew(n, 1), {op("RandomUniform", ew(n, 1), {}, {n})}, {n})}, {n});
  };
  const Shape image{n, side, side, 3};
  auto l = b.layer("distorted_inputs");
  Value queue;
  Value label, x;
  {
    // read_cifar10: FixedLengthRecordReader over string_input_producer's filename queue.
    Value files = op("FIFOQueueV2", none, {}, {}, 0);
    Value reader = op("FixedLengthRecordReaderV2", none, {}, {}, 0);
    Value record = b.queue_runner_op("ReaderReadV2", KernelSignature::copy(n * kRecord), {reader, files},
                                     {{n, kRecord}}, 1)[0];
    Value bytes = op("DecodeRaw", KernelSignature::copy(n * kRecord), {record}, {n, kRecord}, 1);
    label = op("Cast", ew(n, 1), {op("StridedSlice", KernelSignature::copy(n), {bytes}, {n, 1}, 1)}, {n, 1});
    x = op("StridedSlice", KernelSignature::copy(n * kPixels), {bytes}, {n, kPixels}, 1);
    x = op("Reshape", none, {x}, {n, 3, kSide, kSide}, 1);
    x = op("Transpose", KernelSignature::copy(n * kPixels), {x}, {n, kSide, kSide, 3}, 1);
    x = op("Cast", ew(n * kPixels, 1), {x}, {n, kSide, kSide, 3});
  }
  {
    // random_ops.random_crop: checked shape arithmetic, a random offset, a Slice.
    auto s = b.scope("random_crop");
    Value shape = small("Shape", {x});
    Value check = small("Assert", {small("All", {small("GreaterEqual", {shape})})});
    Value limit = small("add", {small("sub", {small("Identity", {shape, check})})});
    Value offset = op("mod", ew(3 * n, 2), {op("RandomUniformInt", ew(3 * n, 1), {small("Shape", {shape})}, {n, 3}), limit},
                      {n, 3});
    x = op("Slice", KernelSignature::copy(4 * n * crop), {x, offset}, image);
  }
  {
    // image_ops.random_flip_left_right: tf.cond(uniform < 0.5, reverse, identity); the reverse runs
    // for half of the images.
    auto s = b.scope("random_flip_left_right");
    Value pred = op("Less", ew(n, 1), {random_scalar()}, {n});
    auto c = b.scope("cond");
    Value sw = op("Switch", none, {pred}, {n});
    Value pred_id = op("Identity", none, {pred}, {n});
    op("Identity", none, {sw}, {n});
    op("Identity", none, {sw}, {n});
    Value flipped = op("ReverseV2", KernelSignature::copy(4 * (n / 2) * crop), {op("Switch", none, {x, pred_id}, image)},
                       image);
    x = op("Merge", none, {flipped, op("Switch", none, {x, pred_id}, image)}, image);
  }
  {
    // image_ops.random_brightness: a random delta added (convert_image_dtype float→float is an
    // Identity on each side).
    auto s = b.scope("random_brightness");
    Value delta = random_scalar();
    x = op("Identity", none, {op("Add", ew(n * crop, 2), {op("Identity", none, {x}, image), delta}, image)}, image);
  }
  {
    auto s = b.scope("random_contrast");
    Value factor = random_scalar();
    // AdjustContrastv2: per-channel mean, then (x - mean) · factor + mean.
    x = op("Identity", none, {op("AdjustContrastv2", ew(n * crop, 3), {op("Identity", none, {x}, image), factor}, image)},
           image);
  }
  {
    // image_ops.per_image_standardization: (x - mean) / max(stddev, 1/sqrt(pixels)).
    auto s = b.scope("per_image_standardization");
    auto reduce = KernelSignature::reduction(n * crop, n);
    Value pixels = op("Prod", none, {small("Shape", {x})}, {n});
    Value mean = op("Mean", reduce, {x}, {n});
    Value mean_sq = op("Mean", reduce, {op("Square", ew(n * crop, 1), {x}, image)}, {n});
    Value variance = op("Relu", ew(n, 1), {op("sub", ew(n, 2), {mean_sq, op("Square", ew(n, 1), {mean}, {n})}, {n})}, {n});
    Value min_stddev = op("Rsqrt", ew(n, 1), {op("Cast", ew(n, 1), {pixels}, {n})}, {n});
    Value scale = op("Maximum", ew(n, 2), {op("Sqrt", ew(n, 1), {variance}, {n}), min_stddev}, {n});
    x = op("truediv", ew(n * crop, 2), {op("Sub", ew(n * crop, 2), {x, mean}, image), scale}, image);
  }
  {
    // tf.train.shuffle_batch: each thread enqueues one (image, label); the step dequeues a batch.
    auto s = b.scope("shuffle_batch");
    queue = op("RandomShuffleQueueV2", none, {}, {}, 0);
    b.queue_runner_op("QueueEnqueueV2", KernelSignature::copy(4 * n * (crop + 1)), {queue, x, label}, {});
  }
  return queue;
}

}  // namespace

void build_cifar10_cnn(TrainingGraphBuilder& b, const GenOptions& o) {
  const int64_t n = o.integer("batch"), side = o.integer("image");
  if (side > 32)
    throw InputError("model 'cifar10_cnn': image = " + std::to_string(side) +
                     ": must be <= 32 (crops of the 32x32 CIFAR-10 images)");
  Value queue = distorted_inputs(b, n, side);
  auto in = b.input_pipeline({{n, side, side, 3}, {n}}, "QueueDequeueManyV2", {queue});
  Value labels;
  {
    // _generate_image_and_label_batch: tf.reshape(label_batch, [batch_size]).
    auto l = b.layer("input");
    labels = b.reshape(in[1], {n});
  }
  Value x = in[0];
  int32_t layer = 0;
  // conv1 → pool1 → norm1, conv2 → norm2 → pool2, as cifar10.inference orders them. Every weight
  // goes through _variable_with_weight_decay, whose `if wd is not None` adds an L2Loss · wd term
  // to the loss also for the conv and softmax weights (wd = 0.0).
  for (int block = 1; block <= 2; ++block) {
    std::string id = std::to_string(block);
    {
      auto l = b.layer("conv" + id, layer++);
      Value w = b.variable("weights", {5, 5, b.shape(x)[3], 64});
      b.add_weight_decay(w, 0.0);
      x = b.relu(b.bias_add(b.conv2d(x, w, 1, 2, 2), b.variable("biases", {64})));
    }
    auto pool = [&] {
      auto l = b.layer("pool" + id, layer++);
      // SAME padding of a 3x3/2 window: pad 1, ceil(side/2) outputs.
      x = b.max_pool(x, 3, 2, 1);
    };
    auto norm = [&] {
      auto l = b.layer("norm" + id, layer++);
      x = b.lrn(x, 4);
    };
    if (block == 1) {
      pool();
      norm();
    } else {
      norm();
      pool();
    }
  }
  // The dense layers add their biases with `+` / tf.add (an Add that broadcasts, whose gradient
  // sums over the batch through Shape/BroadcastGradientArgs/Sum/Reshape), not tf.nn.bias_add.
  auto dense = [&](Value v, int64_t units, double decay) {
    Value w = b.variable("weights", {b.shape(v)[1], units});
    b.add_weight_decay(w, decay);
    Value bias = b.variable("biases", {units});
    return b.add(b.matmul(v, w), bias);
  };
  const Shape s = b.shape(x);
  {
    auto l = b.layer("local3", layer++);
    x = b.relu(dense(b.reshape(x, {n, s[1] * s[2] * s[3]}), 384, 0.004));
  }
  {
    auto l = b.layer("local4", layer++);
    x = b.relu(dense(x, 192, 0.004));
  }
  auto l = b.layer("softmax_linear", layer++);
  Value logits = dense(x, 10, 0.0);
  // cifar10.loss: labels cast to int64, mean sparse cross-entropy; minimize() adds the decay terms.
  b.minimize(b.softmax_cross_entropy(logits, b.cast(labels)));
}

void build_resnet(TrainingGraphBuilder& b, const GenOptions& o, int depth) {
  std::vector<int> blocks;
  switch (depth) {
    case 50: blocks = {3, 4, 6, 3}; break;
    case 101: blocks = {3, 4, 23, 3}; break;
    case 152: blocks = {3, 8, 36, 3}; break;
    case 200: blocks = {3, 24, 36, 3}; break;
    default: PLACELAB_CHECK(false) << "no ResNet-" << depth;
  }
  const int64_t n = o.integer("batch"), side = o.integer("image");
  auto in = b.input_pipeline({{n, side, side, 3}, {n}});
  Value x;
  int32_t layer = 0;
  {
    auto l = b.layer("conv1", layer++);
    x = conv_bn(b, in[0], "conv", 64, 7, 7, 2, 3, 3);
    x = b.max_pool(x, 3, 2, 1);
  }
  for (std::size_t stage = 0; stage < blocks.size(); ++stage) {
    const int64_t width = int64_t{64} << stage;
    for (int j = 0; j < blocks[stage]; ++j) {
      auto l = b.layer("layer" + std::to_string(stage + 1) + "/block" + std::to_string(j), layer++);
      // v1.5: the stride sits on the 3x3 convolution.
      const int64_t stride = (j == 0 && stage > 0) ? 2 : 1;
      // The TF graph builds the shortcut first; torchvision's Bottleneck.forward runs it after
      // conv3, and the PyTorch form keeps the order it launches kernels in.
      const bool pytorch = b.options().framework == Framework::kPyTorch;
      Value shortcut = x;
      if (j == 0 && !pytorch) shortcut = conv_bn(b, x, "downsample", 4 * width, 1, 1, stride, 0, 0, false);
      Value y = conv_bn(b, x, "conv1", width, 1, 1, 1, 0, 0);
      y = conv_bn(b, y, "conv2", width, 3, 3, stride, 1, 1);
      y = conv_bn(b, y, "conv3", 4 * width, 1, 1, 1, 0, 0, false);
      if (j == 0 && pytorch) shortcut = conv_bn(b, x, "downsample", 4 * width, 1, 1, stride, 0, 0, false);
      x = b.relu(b.add(y, shortcut));
    }
  }
  b.minimize(classifier(b, x, in[1], 1000, layer, false));
}

void build_alexnet(TrainingGraphBuilder& b, const GenOptions& o) {
  // torchvision.models.alexnet: five convolutions with biases (11x11/4, 5x5, 3x3 ×3), three 3x3/2
  // max pools, a 6x6 adaptive average pool (an identity at 224 px, as torchvision still runs it),
  // two dropout + linear + ReLU layers and the 1000-way classifier.
  const int64_t n = o.integer("batch"), side = o.integer("image");
  // The convolutions and pools below leave (side - 223) / 32 + 6 pixels: smaller images leave
  // nothing for the 6x6 pool (torchvision would fail on them too).
  if (side < 223) throw InputError("image = " + std::to_string(side) + ": must be >= 223 pixels (the last feature map is then 6x6)");
  auto in = b.input_pipeline({{n, side, side, 3}, {n}});
  Value x = in[0];
  int32_t layer = 0;
  struct Conv {
    int64_t filters, kernel, stride, pad;
    bool pool;
  };
  const Conv convs[] = {{64, 11, 4, 2, true}, {192, 5, 1, 2, true}, {384, 3, 1, 1, false}, {256, 3, 1, 1, false},
                        {256, 3, 1, 1, true}};
  for (std::size_t i = 0; i < std::size(convs); ++i) {
    const Conv& c = convs[i];
    auto l = b.layer("features/conv" + std::to_string(i + 1), layer++);
    Value w = b.variable("weights", {c.kernel, c.kernel, b.shape(x)[3], c.filters});
    x = b.relu(b.conv2d_bias(x, w, b.variable("biases", {c.filters}), c.stride, c.pad, c.pad));
    if (c.pool) x = b.max_pool(x, 3, 2, 0);
  }
  PLACELAB_CHECK(b.shape(x)[1] >= 6) << "alexnet's last feature map at image " << side << ": " << b.shape(x)[1];
  {
    auto l = b.layer("avgpool", layer++);
    const Shape s = b.shape(x);
    // AdaptiveAvgPool2d((6, 6)) of a 6x6 map (224 px) is a 1x1 window; of a larger one, windows
    // of side/6 (exact when side is a multiple of 6, as PyTorch's kernel then computes it).
    const int64_t k = s[1] / 6;
    x = b.avg_pool(x, k, k, 0);
    x = b.reshape(x, {n, num_elements(b.shape(x)) / n});
  }
  for (int i = 1; i <= 2; ++i) {
    auto l = b.layer("classifier/fc" + std::to_string(i), layer++);
    x = b.dropout(x, 0.5);
    x = b.relu(b.dense(x, b.variable("weights", {b.shape(x)[1], 4096}), b.variable("biases", {4096})));
  }
  auto l = b.layer("classifier/logits", layer++);
  Value logits = b.dense(x, b.variable("weights", {4096, 1000}), b.variable("biases", {1000}));
  b.minimize(b.softmax_cross_entropy(logits, in[1]));
}

namespace {

// Inception modules of torchvision's inception_v3 (kernel sizes as (height, width)).
struct Inception {
  TrainingGraphBuilder& b;
  Value c(Value x, std::string_view name, int64_t k, int64_t kh, int64_t kw, int64_t stride = 1, int64_t ph = 0,
          int64_t pw = 0) {
    return conv_bn(b, x, name, k, kh, kw, stride, ph, pw, true, true);
  }
  Value a(Value x, int64_t pool_features) {
    Value b1 = c(x, "branch1x1", 64, 1, 1);
    Value b5 = c(c(x, "branch5x5_1", 48, 1, 1), "branch5x5_2", 64, 5, 5, 1, 2, 2);
    Value b3 = c(c(c(x, "branch3x3dbl_1", 64, 1, 1), "branch3x3dbl_2", 96, 3, 3, 1, 1, 1), "branch3x3dbl_3", 96, 3, 3,
                 1, 1, 1);
    Value bp = c(b.avg_pool(x, 3, 1, 1), "branch_pool", pool_features, 1, 1);
    return b.concat({b1, b5, b3, bp}, 3);
  }
  Value b_(Value x) {
    Value b3 = c(x, "branch3x3", 384, 3, 3, 2);
    Value bd = c(c(c(x, "branch3x3dbl_1", 64, 1, 1), "branch3x3dbl_2", 96, 3, 3, 1, 1, 1), "branch3x3dbl_3", 96, 3, 3, 2);
    return b.concat({b3, bd, b.max_pool(x, 3, 2, 0)}, 3);
  }
  Value c7(Value x, int64_t w) {
    Value b1 = c(x, "branch1x1", 192, 1, 1);
    Value b7 = c(c(c(x, "branch7x7_1", w, 1, 1), "branch7x7_2", w, 1, 7, 1, 0, 3), "branch7x7_3", 192, 7, 1, 1, 3, 0);
    Value bd = c(x, "branch7x7dbl_1", w, 1, 1);
    bd = c(bd, "branch7x7dbl_2", w, 7, 1, 1, 3, 0);
    bd = c(bd, "branch7x7dbl_3", w, 1, 7, 1, 0, 3);
    bd = c(bd, "branch7x7dbl_4", w, 7, 1, 1, 3, 0);
    bd = c(bd, "branch7x7dbl_5", 192, 1, 7, 1, 0, 3);
    Value bp = c(b.avg_pool(x, 3, 1, 1), "branch_pool", 192, 1, 1);
    return b.concat({b1, b7, bd, bp}, 3);
  }
  Value d(Value x) {
    Value b3 = c(c(x, "branch3x3_1", 192, 1, 1), "branch3x3_2", 320, 3, 3, 2);
    Value b7 = c(x, "branch7x7x3_1", 192, 1, 1);
    b7 = c(b7, "branch7x7x3_2", 192, 1, 7, 1, 0, 3);
    b7 = c(b7, "branch7x7x3_3", 192, 7, 1, 1, 3, 0);
    b7 = c(b7, "branch7x7x3_4", 192, 3, 3, 2);
    return b.concat({b3, b7, b.max_pool(x, 3, 2, 0)}, 3);
  }
  Value e(Value x) {
    Value b1 = c(x, "branch1x1", 320, 1, 1);
    Value b3 = c(x, "branch3x3_1", 384, 1, 1);
    b3 = b.concat({c(b3, "branch3x3_2a", 384, 1, 3, 1, 0, 1), c(b3, "branch3x3_2b", 384, 3, 1, 1, 1, 0)}, 3);
    Value bd = c(c(x, "branch3x3dbl_1", 448, 1, 1), "branch3x3dbl_2", 384, 3, 3, 1, 1, 1);
    bd = b.concat({c(bd, "branch3x3dbl_3a", 384, 1, 3, 1, 0, 1), c(bd, "branch3x3dbl_3b", 384, 3, 1, 1, 1, 0)}, 3);
    Value bp = c(b.avg_pool(x, 3, 1, 1), "branch_pool", 192, 1, 1);
    return b.concat({b1, b3, bd, bp}, 3);
  }
};

}  // namespace

void build_inception_v3(TrainingGraphBuilder& b, const GenOptions& o) {
  const int64_t n = o.integer("batch");
  auto in = b.input_pipeline({{n, 299, 299, 3}, {n}});
  Inception m{b};
  Value x = in[0];
  int32_t layer = 0;
  auto module = [&](std::string_view name, auto&& body) {
    auto l = b.layer(name, layer++);
    x = body(x);
  };
  module("Conv2d_1a_3x3", [&](Value v) { return m.c(v, "conv", 32, 3, 3, 2); });
  module("Conv2d_2a_3x3", [&](Value v) { return m.c(v, "conv", 32, 3, 3); });
  module("Conv2d_2b_3x3", [&](Value v) { return b.max_pool(m.c(v, "conv", 64, 3, 3, 1, 1, 1), 3, 2, 0); });
  module("Conv2d_3b_1x1", [&](Value v) { return m.c(v, "conv", 80, 1, 1); });
  module("Conv2d_4a_3x3", [&](Value v) { return b.max_pool(m.c(v, "conv", 192, 3, 3), 3, 2, 0); });
  module("Mixed_5b", [&](Value v) { return m.a(v, 32); });
  module("Mixed_5c", [&](Value v) { return m.a(v, 64); });
  module("Mixed_5d", [&](Value v) { return m.a(v, 64); });
  module("Mixed_6a", [&](Value v) { return m.b_(v); });
  module("Mixed_6b", [&](Value v) { return m.c7(v, 128); });
  module("Mixed_6c", [&](Value v) { return m.c7(v, 160); });
  module("Mixed_6d", [&](Value v) { return m.c7(v, 160); });
  module("Mixed_6e", [&](Value v) { return m.c7(v, 192); });
  Value aux_loss;
  if (o.text("aux_logits") == "true") {
    // torchvision's InceptionAux: 5x5/3 average pool, 1x1 conv 128, 5x5 conv 768, dense; its loss
    // is weighted 0.4 in tensorflow/models/inception. It shares the layer id of Mixed_6e.
    auto l = b.layer("AuxLogits", layer - 1);
    Value a = b.avg_pool(x, 5, 3, 0);
    a = m.c(a, "conv0", 128, 1, 1);
    a = m.c(a, "conv1", 768, 5, 5);
    const Shape s = b.shape(a);
    a = b.reshape(a, {s[0], s[3]});
    Value w = b.variable("weights", {s[3], 1000});
    b.add_weight_decay(w, 4e-5);
    aux_loss = b.scale(b.softmax_cross_entropy(b.dense(a, w, b.variable("biases", {1000})), in[1]), 0.4);
  }
  module("Mixed_7a", [&](Value v) { return m.d(v); });
  module("Mixed_7b", [&](Value v) { return m.e(v); });
  module("Mixed_7c", [&](Value v) { return m.e(v); });
  Value loss = classifier(b, x, in[1], 1000, layer, true);
  if (aux_loss.valid()) {
    auto l = b.layer("total_loss", layer);
    loss = b.add(loss, aux_loss);
  }
  b.minimize(loss);
}

}  // namespace placelab::models::detail
