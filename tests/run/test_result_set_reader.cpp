// Unit tests of the reading side of result folders (issue 25): the bounded file reader
// (include/attention_plasticity/io/bounded_read.hpp), the result-set reader
// (run/result_set_reader.hpp) behind ap_merge and ap_compare, the output-folder overlap check
// (io/folder_overlap.hpp), and the checks compare_result_sets.hpp makes of what it reads (docs/method.md
// §8.6). Hostile files are planted with POSIX calls; every expected message is written out by
// hand. A check that would wait (a FIFO opened for reading) runs in a child process under an
// alarm, so that a regression fails instead of hanging.

#include <cmath>
#include <csignal>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <attention_plasticity/io/bounded_read.hpp>
#include <attention_plasticity/io/folder_overlap.hpp>
#include <attention_plasticity/run/compare_result_sets.hpp>
#include <attention_plasticity/run/result_set.hpp>
#include <attention_plasticity/run/result_set_reader.hpp>

#include "run_files.hpp"

using namespace attention_plasticity::run;
using namespace ap_test;
namespace io = attention_plasticity::io;

namespace
{
namespace fs = std::filesystem;

/// Runs `f` in a child process killed after 10 s; true when it returned normally in time.
bool finishes_in_time(const std::function<void()>& f)
{
    const pid_t pid = ::fork();
    if (pid == 0)
    {
        ::alarm(10);
        try
        {
            f();
        }
        catch (...)
        {
        }
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// The message of the compare_error compare_result_sets throws ("" when none).
std::string compare_error_of(const compare_options& options)
{
    try
    {
        compare_result_sets(options);
    }
    catch (const compare_error& e)
    {
        return e.what();
    }
    return "";
}

const std::string small_metrics_header =
    "layer,q_head,k_head,d_model,ap_overall,ap_overall_bias,ap_overall_se,ap_first20,ap_first20_bias,ap_first20_se,"
    "ap_last20,ap_last20_bias,ap_last20_se,ap_drop,ap_drop_bias,ap_drop_se,context_length\n";
const std::string small_profile_header = "layer,q_head,k_head,q_bucket,plasticity,plasticity_bias,plasticity_se\n";

/// A metrics row of head (layer, q_head), k_head 0, with ap_overall `ap` and its error `se`.
std::string metrics_row(int layer, int q_head, const std::string& ap = "0.6", const std::string& se = "0.01")
{
    return std::to_string(layer) + "," + std::to_string(q_head) + ",0,8," + ap + ",-0.001," + se
           + ",0.7,-0.001,0.02,0.5,-0.001,0.02,0.2,0,0.03,100\n";
}

/// A plain result folder (copies of the files) of heads (0, 0) and (0, 1), one bucket each.
void write_set(const std::string& folder, const std::string& metrics = "", const std::string& profile = "")
{
    write_text(folder + "/head_metrics.csv",
               metrics.empty() ? small_metrics_header + metrics_row(0, 0) + metrics_row(0, 1) : metrics);
    write_text(folder + "/head_profile.csv",
               profile.empty() ? small_profile_header + "0,0,0,1,0.6,-0.002,0.02\n0,1,0,1,0.5,-0.002,0.02\n" : profile);
}
}  // namespace

TEST_CASE("bounded_read: a FIFO, a device, a folder or a file beyond the limit is refused at once, naming it",
          "[result_set_reader]")
{
    temp_folder dir("bounded_read");
    const std::string fifo = dir / "fifo.csv";
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    CHECK(input_error_of([&] { io::read_regular_file(fifo, 1000); }) == fifo + ": is a FIFO, not a regular file");
    // A link to the FIFO is followed to it, and refused the same way, without waiting.
    const std::string link = dir / "link.csv";
    fs::create_symlink(fifo, link);
    CHECK(finishes_in_time([&] { io::read_regular_file(link, 1000); }));
    CHECK(input_error_of([&] { io::read_regular_file(link, 1000, "shown.csv"); })
          == "shown.csv: is a FIFO, not a regular file");
    CHECK(input_error_of([&] { io::read_regular_file("/dev/zero", 1000); })
          == "/dev/zero: is a character device, not a regular file");
    CHECK(input_error_of([&] { io::read_regular_file(dir / "", 1000); }).find("is a folder, not a regular file")
          != std::string::npos);
    // A sparse file of 3 GiB: refused by its size, nothing read.
    const std::string huge = dir / "huge.csv";
    write_text(huge, "");
    fs::resize_file(huge, 3ull << 30);
    CHECK(input_error_of([&] { io::read_regular_file(huge, 1ull << 30); })
          == huge + ": 3221225472 bytes, more than the 1073741824 accepted");
    CHECK(input_error_of([&] { io::read_regular_file(dir / "absent.csv", 10); }) == dir / "absent.csv" + ": file not found");
    write_text(dir / "small.csv", "a,b\n1,2\n");
    CHECK(io::read_regular_file(dir / "small.csv", 8) == "a,b\n1,2\n");
}

TEST_CASE("bounded_read: line_reader gives the lines, refuses an endless line, tells a cut last line",
          "[result_set_reader]")
{
    temp_folder dir("line_reader");
    write_text(dir / "t.csv", "a,b\n1,2\n3");
    io::line_reader in(dir / "t.csv", 100, 10);
    std::string line;
    std::vector<std::string> lines;
    while (in.next(line))
    {
        lines.push_back(line);
    }
    CHECK(lines == std::vector<std::string>{"a,b", "1,2", "3"});
    CHECK_FALSE(in.last_line_ended());
    write_text(dir / "zeros.csv", std::string(200000, '0'));
    io::line_reader zeros(dir / "zeros.csv", 1 << 20, 1000);
    CHECK(input_error_of([&] { zeros.next(line); })
          == dir / "zeros.csv" + ": a line longer than 1000 bytes (not a table of this program)");
}

TEST_CASE("result_set_reader: the lock is never waited on or followed, and a folder being written is refused",
          "[result_set_reader]")
{
    temp_folder dir("reader_lock");
    const std::string out = dir / "set";
    {
        result_set_writer writer(out, {"head_metrics.csv"});
        writer.commit({{"head_metrics.csv", {"x\n"}}});
    }
    const std::string lock = out + "/.ap_results/lock";
    SECTION("a complete set is read through `current`")
    {
        const result_set_reader reader(out);
        CHECK(reader.is_set());
        CHECK(reader.read("head_metrics.csv", 100) == "x\n");
        CHECK(input_error_of([&] { reader.read("head_profile.csv", 100); }) == out + "/head_profile.csv: file not found");
    }
    SECTION("a FIFO as the lock")
    {
        fs::remove(lock);
        REQUIRE(::mkfifo(lock.c_str(), 0644) == 0);
        CHECK(finishes_in_time([&] { result_set_reader reader(out); }));
        CHECK_THROWS_WITH(result_set_reader(out), lock + ": is a FIFO, not this program's lock file (move it away)");
    }
    SECTION("a symbolic link to a FIFO as the lock")
    {
        fs::remove(lock);
        REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
        fs::create_symlink(dir / "fifo", lock);
        CHECK(finishes_in_time([&] { result_set_reader reader(out); }));
        CHECK_THROWS_WITH(result_set_reader(out), lock + ": is a symbolic link (to '" + dir / "fifo"
                                                      + "'), not this program's lock file; it is not followed (move it away)");
    }
    SECTION("a run writing into the folder")
    {
        result_set_writer writing(out, {"head_metrics.csv"});
        try
        {
            result_set_reader reader(out);
            FAIL("a folder being written was read");
        }
        catch (const result_folder_error& e)
        {
            CHECK(e.problem() == result_folder_problem::busy);
            CHECK(std::string(e.what()).rfind("a run is writing into it (pid " + std::to_string(::getpid()), 0) == 0);
        }
    }
}

TEST_CASE("folder_overlap: an output folder that is, lies inside or holds an input, by the folders themselves",
          "[result_set_reader]")
{
    temp_folder dir("overlap");
    fs::create_directories(dir / "in/sub");
    fs::create_directories(dir / "other");
    fs::create_directory_symlink(dir / "in", dir / "alias");
    const std::vector<std::string> inputs = {dir / "other", dir / "in"};
    auto relation = [&](const std::string& out) { return io::find_folder_overlap(out, inputs).relation; };
    CHECK(relation(dir / "in") == io::folder_relation::same);
    CHECK(io::find_folder_overlap(dir / "in", inputs).input == 1);
    CHECK(relation(dir / "alias") == io::folder_relation::same);          // a link to the input
    CHECK(relation(dir / "in/sub/../") == io::folder_relation::same);     // ".." and a trailing separator
    CHECK(relation(dir / "in/sub") == io::folder_relation::inside);
    CHECK(relation(dir / "alias/sub") == io::folder_relation::inside);
    CHECK(relation(dir / "alias/new/deeper") == io::folder_relation::inside);  // not there yet: made inside
    CHECK(relation(dir / "") == io::folder_relation::contains);          // holds both: the first named
    CHECK(io::find_folder_overlap(dir / "", inputs).input == 0);
    CHECK(relation(dir / "elsewhere") == io::folder_relation::apart);
    CHECK(relation(dir / "in2") == io::folder_relation::apart);  // a name that starts like the input's
    CHECK(io::find_folder_overlap(dir / "x", {dir / "absent"}).relation == io::folder_relation::apart);
}

TEST_CASE("compare_runs: impossible values, duplicated columns or rows are refused naming the file, line and column",
          "[result_set_reader][compare]")
{
    temp_folder dir("compare_values");
    const std::string a = dir / "A", b = dir / "B";
    write_set(a);
    compare_options options;
    options.folders = {a, b};
    auto refused = [&](const std::string& metrics, const std::string& profile = "") {
        fs::remove_all(b);
        write_set(b, metrics, profile);
        return compare_error_of(options);
    };
    const std::string m = b + "/head_metrics.csv", p = b + "/head_profile.csv";
    CHECK(refused("") == "");  // the clean pair compares
    CHECK(refused(small_metrics_header + metrics_row(0, 0, "0.6", "inf") + metrics_row(0, 1))
          == m + ": line 2: column ap_overall_se: inf is not a standard error (finite and >= 0, or nan)");
    CHECK(refused(small_metrics_header + metrics_row(0, 0) + metrics_row(0, 1, "0.6", "-0.01"))
          == m + ": line 3: column ap_overall_se: -0.01 is not a standard error (finite and >= 0, or nan)");
    CHECK(refused(small_metrics_header + metrics_row(0, 0, "7.5"))
          == m + ": line 2: column ap_overall: 7.5 is not a plasticity (within [0, 1], docs/method.md §3.2)");
    CHECK(refused(small_metrics_header + metrics_row(0, 0, "-0.25"))
          == m + ": line 2: column ap_overall: -0.25 is not a plasticity (within [0, 1], docs/method.md §3.2)");
    CHECK(refused("", small_profile_header + "0,0,0,1,0.6,-0.002,0.02\n0,1,0,1,1.5,-0.002,0.02\n")
          == p + ": line 3: column plasticity: 1.5 is not a plasticity (within [0, 1], docs/method.md §3.2)");
    CHECK(refused("", small_profile_header + "0,0,0,1,0.6,-inf,0.02\n0,1,0,1,0.5,-0.002,0.02\n")
          == p + ": line 2: column plasticity_bias: -inf is not a bias (finite or nan)");
    // A column twice: which one would be read?
    CHECK(refused("layer,ap_overall_se," + small_metrics_header.substr(6))
          == m + ": line 1: column 'ap_overall_se' appears twice (columns 2 and 8)");
    CHECK(refused("", "layer,q_head,k_head,q_bucket,plasticity,plasticity,plasticity_bias,plasticity_se\n")
          == p + ": line 1: column 'plasticity' appears twice (columns 5 and 6)");
    // A row twice: a head's metrics, a bucket of a head's profile.
    CHECK(refused(small_metrics_header + metrics_row(0, 0) + metrics_row(0, 1) + metrics_row(0, 0))
          == m + ": line 4: head layer 0 q_head 0 has two rows");
    CHECK(refused("", small_profile_header + "0,0,0,1,0.6,-0.002,0.02\n0,1,0,1,0.5,-0.002,0.02\n0,0,0,1,0.6,-0.002,0.02\n")
          == p + ": line 4: head layer 0 q_head 0 q_bucket 1 has two rows");
    // NaN stays allowed: a quantity without an estimate is not tested.
    CHECK(refused(small_metrics_header + metrics_row(0, 0) + "0,1,0,8,0.6,-0.001,0.01,nan,nan,nan,0.5,-0.001,0.02,nan,nan,nan,100\n")
          == "");
}

TEST_CASE("compare_runs: the refusal of different heads names the two sets with their own counts, and names that "
          "would not read back are refused", "[result_set_reader][compare]")
{
    temp_folder dir("compare_heads");
    const std::string a = dir / "A", b = dir / "B", c = dir / "C";
    write_set(a);
    write_set(b);
    write_set(c, small_metrics_header + metrics_row(0, 0), small_profile_header + "0,0,0,1,0.6,-0.002,0.02\n");
    compare_options options;
    options.folders = {a, b, c};
    CHECK(compare_error_of(options)
          == "result sets 'A' and 'C' have different heads (2 and 1 heads, 1 in common): compare the common heads "
             "with --common-heads (common_heads=True)");
    options.folders = {c, a};
    CHECK(compare_error_of(options)
          == "result sets 'C' and 'A' have different heads (1 and 2 heads, 1 in common): compare the common heads "
             "with --common-heads (common_heads=True)");
    options.folders = {a, b};
    options.names = {"x\"y", "z"};
    CHECK(compare_error_of(options) == "set name 'x\"y' holds a comma, a double quote or a line break (give --names)");
    options.names = {"x\ry", "z"};
    CHECK(compare_error_of(options) == "set name 'x\ry' holds a comma, a double quote or a line break (give --names)");
}
