// The CUDA, NCCL and MPI check helpers (src/common/*_check.h): the failed call, the status text
// and a code from the status, without a GPU or a running MPI job (only the error tables of each
// library are consulted). Built where the libraries are; each part compiles in on its own.
#include <gtest/gtest.h>

#include <aperture/error.h>

#include <string>

#if APERTURE_TEST_CUDA
#include "common/cuda_check.h"
#endif
#if APERTURE_TEST_NCCL
#include "common/nccl_check.h"
#endif
#if APERTURE_TEST_MPI
#include "common/mpi_check.h"
#endif

namespace {

using aperture::Error;
using aperture::ErrorCode;

// The Error `call` throws; fails the test when it throws none.
template <class Call>
Error thrown_by(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no aperture::Error thrown";
  return Error(ErrorCode::internal, "(no error)");
}

#if APERTURE_TEST_CUDA
cudaError_t cudaMallocThatFails(void**, std::size_t) { return cudaErrorMemoryAllocation; }
cudaError_t cudaSetDeviceThatFails(int) { return cudaErrorInvalidDevice; }
cudaError_t cudaMemcpyThatFails() { return cudaErrorInvalidValue; }

TEST(CudaCheck, NamesTheCallTheStatusAndTheLine) {
  void* p = nullptr;
  const Error e = thrown_by([&] { APERTURE_CUDA_CHECK(cudaMallocThatFails(&p, 64), "test heap"); });
  EXPECT_EQ(e.code(), ErrorCode::out_of_memory);
  EXPECT_EQ(e.call(), "cudaMallocThatFails");
  const std::string detail(e.detail());
  EXPECT_EQ(detail.rfind("test heap: cudaMallocThatFails(&p, 64) failed: cudaErrorMemoryAllocation (", 0), 0u) << detail;
  EXPECT_NE(detail.find(" at tests/unit/check_helpers_test.cpp:"), std::string::npos) << detail;

  EXPECT_EQ(thrown_by([] { APERTURE_CUDA_CHECK(cudaSetDeviceThatFails(7)); }).code(), ErrorCode::unavailable);
  EXPECT_EQ(thrown_by([] { APERTURE_CUDA_CHECK(cudaMemcpyThatFails()); }).code(), ErrorCode::system);
  EXPECT_EQ(APERTURE_CUDA_TRY(cudaSuccess), "");
  EXPECT_EQ(APERTURE_CUDA_TRY(cudaMemcpyThatFails()).rfind("cudaMemcpyThatFails() failed: cudaErrorInvalidValue", 0), 0u);
}
#endif

#if APERTURE_TEST_NCCL
ncclResult_t ncclCommInitRankThatFails() { return ncclRemoteError; }
ncclResult_t ncclMemAllocThatFails() { return ncclInvalidArgument; }

TEST(NcclCheck, NamesTheCallAndTheStatus) {
  const Error e = thrown_by([] { APERTURE_NCCL_CHECK(ncclCommInitRankThatFails(), nullptr, "nccl start"); });
  EXPECT_EQ(e.code(), ErrorCode::peer_lost);
  EXPECT_EQ(e.call(), "ncclCommInitRankThatFails");
  const std::string detail(e.detail());
  EXPECT_EQ(detail.rfind("nccl start: ncclCommInitRankThatFails() failed: ", 0), 0u) << detail;
  EXPECT_NE(detail.find(ncclGetErrorString(ncclRemoteError)), std::string::npos) << detail;
  EXPECT_EQ(thrown_by([] { APERTURE_NCCL_CHECK(ncclMemAllocThatFails(), nullptr); }).code(),
            ErrorCode::invalid_argument);
  EXPECT_EQ(APERTURE_NCCL_TRY(ncclSuccess, nullptr), "");
}
#endif

#if APERTURE_TEST_MPI
int MPI_Barrier_that_fails() { return MPI_ERR_COMM; }

TEST(MpiCheck, NamesTheCallTheTextAndTheCode) {
  const Error e = thrown_by([] { APERTURE_MPI_CHECK(MPI_Barrier_that_fails(), "; check the communicator"); });
  EXPECT_EQ(e.code(), ErrorCode::system);
  EXPECT_EQ(e.call(), "MPI_Barrier_that_fails");
  const std::string detail(e.detail());
  EXPECT_EQ(detail.rfind("MPI_Barrier_that_fails() failed: ", 0), 0u) << detail;
  EXPECT_NE(detail.find("(MPI error " + std::to_string(MPI_ERR_COMM) + "); check the communicator"), std::string::npos)
      << detail;
  EXPECT_EQ(APERTURE_MPI_TRY(MPI_SUCCESS), "");
}
#endif

}  // namespace
