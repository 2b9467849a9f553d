// The launcher component's parsers: strict values, mpirun's output tags, wait statuses, programs.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "launcher/args.h"
#include "launcher/mpi_output_tags.h"
#include "launcher/program_path.h"
#include "launcher/wait_status.h"

namespace {

using namespace aperture::launcher;

TEST(Args, IntegersAreStrict) {
  EXPECT_EQ(parse_integer("-n", "4", 1, 1024), 4);
  EXPECT_EQ(parse_integer("-n", "1024", 1, 1024), 1024);
  for (const char* bad : {"0", "1025", "-3", "4x", "", "x", " 4", "99999999999999999999999"})
    EXPECT_THROW(parse_integer("-n", bad, 1, 1024), UsageError) << "'" << bad << "'";
  try {
    parse_integer("-n", "abc", 1, 1024);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("-n"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("abc"), std::string::npos) << e.what();
  }
}

TEST(Args, SecondsAndBytes) {
  EXPECT_DOUBLE_EQ(parse_seconds("--timeout", "2.5"), 2.5);
  for (const char* bad : {"0", "-1", "abc", "1e99", ""}) EXPECT_THROW(parse_seconds("--timeout", bad), UsageError) << bad;
  EXPECT_EQ(parse_bytes("--bytes", "4096"), 4096u);
  EXPECT_EQ(parse_bytes("--bytes", "4K"), 4096u);
  EXPECT_EQ(parse_bytes("--bytes", "2M"), 2u << 20);
  EXPECT_EQ(parse_bytes("--bytes", "1G"), 1u << 30);
  for (const char* bad : {"4X", "K", "-1", ""}) EXPECT_THROW(parse_bytes("--bytes", bad), UsageError) << bad;
  EXPECT_EQ(format_bytes(1 << 20), "1 MiB");
  EXPECT_EQ(format_bytes(12 << 10), "12 KiB");
  EXPECT_EQ(format_bytes(100), "100 B");
}

TEST(Args, OptionValuesInEveryForm) {
  char prog[] = "aperture", n_flag[] = "-n", four[] = "4", joined[] = "-n8", long_eq[] = "--timeout=3", dangling[] = "-n";
  std::string value;
  {
    char* argv[] = {prog, n_flag, four};
    int i = 1;
    EXPECT_TRUE(take_option_value(3, argv, i, "-n", "--ranks", value));
    EXPECT_EQ(value, "4");
    EXPECT_EQ(i, 3) << "i moves past the option and its value";
  }
  {
    char* argv[] = {prog, joined};
    int i = 1;
    EXPECT_TRUE(take_option_value(2, argv, i, "-n", "--ranks", value));
    EXPECT_EQ(value, "8");
  }
  {
    char* argv[] = {prog, long_eq};
    int i = 1;
    EXPECT_TRUE(take_option_value(2, argv, i, "", "--timeout", value));
    EXPECT_EQ(value, "3");
  }
  {
    char* argv[] = {prog, dangling};
    int i = 1;
    EXPECT_THROW(take_option_value(2, argv, i, "-n", "--ranks", value), UsageError);
  }
}

TEST(MpiOutputTags, SplitsTaggedPiecesAndKeepsMpirunsOwnText) {
  auto pieces = split_tagged_line("[1,3]<stdout>:hello world");
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].rank, 3);
  EXPECT_TRUE(pieces[0].is_stdout);
  EXPECT_EQ(pieces[0].text, "hello world");

  pieces = split_tagged_line("[1,0]<stdout>:partial[1,12]<stderr>:oops");
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].rank, 0);
  EXPECT_EQ(pieces[0].text, "partial");
  EXPECT_EQ(pieces[1].rank, 12);
  EXPECT_FALSE(pieces[1].is_stdout);
  EXPECT_EQ(pieces[1].text, "oops");

  pieces = split_tagged_line("mpirun noticed that process rank 2 exited");
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].rank, -1);

  pieces = split_tagged_line("[1,x]<stdout>:not a tag");
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces[0].rank, -1);
}

TEST(WaitStatus, DescribesExitsAndSignals) {
  const int exited3 = 3 << 8;  // what waitpid reports for exit(3)
  EXPECT_EQ(describe_wait_status(exited3), "exited with status 3");
  EXPECT_FALSE(succeeded(exited3));
  EXPECT_EQ(exit_code_of(exited3), 3);
  EXPECT_TRUE(succeeded(0));
  const int killed = SIGKILL;  // WIFSIGNALED with WTERMSIG 9
  ASSERT_TRUE(WIFSIGNALED(killed));
  EXPECT_EQ(describe_wait_status(killed), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(exit_code_of(killed), 128 + 9);
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
}

TEST(ProgramPath, FindsProgramsAndRefusesWhatCannotRun) {
  EXPECT_EQ(resolve_program("/bin/sh"), "/bin/sh");
  EXPECT_NE(resolve_program("sh").find("/sh"), std::string::npos) << "found through PATH";
  EXPECT_THROW(resolve_program("/nonexistent/program"), UsageError);
  EXPECT_THROW(resolve_program("/etc"), UsageError) << "a directory";
  char not_executable[] = "/tmp/aperture-tools-test-XXXXXX";
  const int fd = mkstemp(not_executable);  // created with mode 0600
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_THROW(resolve_program(not_executable), UsageError) << "not executable";
  unlink(not_executable);
  EXPECT_THROW(resolve_program("no-such-program-anywhere-on-path"), UsageError);
}

}  // namespace
