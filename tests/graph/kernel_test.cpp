#include "placelab/graph/kernel.h"

#include <gtest/gtest.h>

#include "placelab/core/error.h"

namespace placelab {
namespace {

TEST(KernelSignature, TextFormRoundTripsForEveryClass) {
  std::vector<KernelSignature> sigs = {
      KernelSignature::noop(),
      KernelSignature::gemm(64, 1024, 512, 2),
      KernelSignature::conv2d(KernelClass::kConv2DBackpropFilter, 32, 3, 299, 299, 32, 3, 3, 2, 0),
      KernelSignature::elementwise(1000, 2),
      KernelSignature::reduction(1000, 10),
      KernelSignature::embedding(40000, 1024, 64),
      KernelSignature::softmax(64, 40000),
      KernelSignature::copy(4096)};
  for (const auto& sig : sigs) {
    auto parsed = parse_kernel_signature(to_string(sig));
    ASSERT_TRUE(parsed) << to_string(sig);
    EXPECT_EQ(*parsed, sig);
  }
  EXPECT_EQ(to_string(KernelSignature::gemm(2, 3, 4)), "gemm{m=2,n=3,k=4,batch=1}");
}

TEST(KernelSignature, RejectsMalformedText) {
  for (const char* bad : {"", "gemm", "gemm{}", "gemm{m=1,n=2,k=3}", "gemm{n=1,m=2,k=3,batch=1}",
                          "warp{x=1}", "copy{bytes=abc}", "copy{bytes=1", "copy{bytes=1,extra=2}"})
    EXPECT_FALSE(parse_kernel_signature(bad)) << bad;
}

TEST(KernelSignature, FlopsAndBytesByHand) {
  EXPECT_DOUBLE_EQ(kernel_flops(KernelSignature::gemm(2, 3, 4, 5)), 2.0 * 2 * 3 * 4 * 5);
  EXPECT_DOUBLE_EQ(kernel_bytes(KernelSignature::gemm(2, 3, 4)), 4.0 * (2 * 4 + 4 * 3 + 2 * 3));
  // 1×1×4×4 input, one 3×3 filter, stride 1, pad 1 → 4×4 output, 2·9 flops per output.
  auto conv = KernelSignature::conv2d(KernelClass::kConv2D, 1, 1, 4, 4, 1, 3, 3, 1, 1);
  EXPECT_DOUBLE_EQ(kernel_flops(conv), 2.0 * 9 * 16);
  EXPECT_DOUBLE_EQ(kernel_bytes(conv), 4.0 * (16 + 9 + 16));
  EXPECT_DOUBLE_EQ(kernel_flops(KernelSignature::copy(100)), 0);
  EXPECT_DOUBLE_EQ(kernel_bytes(KernelSignature::copy(100)), 200);
}

TEST(KernelSignature, NamedDimensions) {
  auto sig = KernelSignature::embedding(10, 20, 30);
  EXPECT_EQ(sig.dim("dim"), 20);
  EXPECT_THROW(sig.dim("m"), Error);
  EXPECT_EQ(kernel_class_from_name("softmax"), KernelClass::kSoftmax);
  EXPECT_FALSE(kernel_class_from_name("Softmax"));
}

}  // namespace
}  // namespace placelab
