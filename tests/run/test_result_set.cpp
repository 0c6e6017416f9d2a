// Unit tests of the result set (include/attention_plasticity/run/result_set.hpp; docs/method.md
// §3.1 "written whole or not at all"): what the output folder holds after a set is written,
// after a write that fails (a file-size limit in a child process: root passes every permission
// check, so a read-only folder cannot stand for a failure here) and after a refusal; the lock
// (a second writer in this process or in another is refused at once, naming the holder); the
// set before kept as `previous` for one run; nothing written through a symbolic link or a hard
// link planted in the folder. The expected folder contents and messages are written out by hand
// from the header's comments; the folders are read back with std::filesystem and POSIX only.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <attention_plasticity/run/result_set.hpp>

#include "run_files.hpp"

using namespace attention_plasticity::run;
namespace io = attention_plasticity::io;
using namespace ap_test;
using strings = std::vector<std::string>;

namespace
{
namespace fs = std::filesystem;

/// The set a test writes: a.csv and b.csv with these contents (each in two pieces).
std::vector<io::result_file> two_files(const std::string& a, const std::string& b)
{
    return {{"a.csv", {"x,y\n", a}}, {"b.csv", {b}}};
}

/// Writes one set of a.csv and b.csv into `out`, as a run does.
void write_set(const std::string& out, const std::string& a, const std::string& b)
{
    const std::string a_text = a;  // the pieces are views: kept alive until the commit
    const std::string b_text = b;
    result_set_writer writer(out, {"a.csv", "b.csv"});
    writer.commit(two_files(a_text, b_text));
}

std::string in_use_text(const std::string& out, long pid)
{
    return "output_dir '" + out + "' is in use by another run (pid " + std::to_string(pid) + " on " + plain_host_name()
           + "); wait for it to finish or choose another --output-dir";
}

/// The names, sorted (as names_in gives a folder's).
strings sorted(strings names)
{
    std::sort(names.begin(), names.end());
    return names;
}

/// The message of the output_error `f` throws ("" when it throws nothing; REQUIREs that type).
template <class F>
std::string output_error_of(F&& f)
{
    try
    {
        f();
    }
    catch (const output_error& e)
    {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("result_set_writer: a set is written whole, the names link to the current set", "[result_set]")
{
    temp_folder dir("set_whole");
    const std::string out = dir / "out";  // absent: created
    {
        result_set_writer writer(out, {"a.csv", "b.csv"});
        CHECK_FALSE(writer.has_earlier_set());
        CHECK(writer.notes().empty());
        // Before the commit nothing of the set is visible: no names, no current set.
        CHECK(names_in(out) == strings{".ap_results"});
        CHECK_FALSE(fs::exists(fs::symlink_status(out + "/.ap_results/current")));
        writer.commit(two_files("1,2\n", "z\n3\n"));
        CHECK(output_error_of([&] { writer.commit(two_files("", "")); })
              == "output_dir '" + out + "': the set was already written or abandoned");
    }
    CHECK(names_in(out) == strings{".ap_results", "a.csv", "b.csv"});
    CHECK(link_text(out + "/a.csv") == ".ap_results/current/a.csv");
    CHECK(link_text(out + "/b.csv") == ".ap_results/current/b.csv");
    CHECK(read_text(out + "/a.csv") == "x,y\n1,2\n");
    CHECK(read_text(out + "/b.csv") == "z\n3\n");

    // The state folder: the lock, `current` naming this process's set, and no temporary left.
    const std::string set = link_text(out + "/.ap_results/current");
    CHECK(set.rfind("set-" + std::to_string(::getpid()) + "-", 0) == 0);
    CHECK(names_in(out + "/.ap_results") == strings{"current", "lock", set});
    CHECK(names_in(out + "/.ap_results/" + set) == strings{"a.csv", "b.csv", "run.json"});
    // run.json: the version of the library that wrote the set (the build's, from CMakeLists.txt's
    // project(VERSION)) and the set's files.
    CHECK(std::string(AP_VERSION) != "unversioned");
    CHECK(read_text(out + "/.ap_results/current/run.json")
          == std::string("{\"attention_plasticity_version\": \"") + AP_VERSION + "\", \"files\": [\"a.csv\", \"b.csv\"]}\n");
    CHECK(read_text(out + "/.ap_results/lock") == "pid " + std::to_string(::getpid()) + " on " + plain_host_name() + "\n");
}

TEST_CASE("result_set_writer: the earlier set stays current until the next is whole, then is kept one run",
          "[result_set]")
{
    temp_folder dir("set_previous");
    const std::string out = dir / "out";
    {
        result_set_writer writer(out, {"a.csv", "b.csv"});
        CHECK(writer.unchanged_text(true) == "nothing was written to " + out);
        CHECK(writer.unchanged_text(false) == "no results were written to " + out);
    }
    CHECK(names_in(out) == strings{".ap_results"});  // a writer dropped without a commit: no set
    CHECK(names_in(out + "/.ap_results") == strings{"lock"});

    write_set(out, "1\n", "first\n");
    const std::string first = link_text(out + "/.ap_results/current");
    {
        result_set_writer writer(out, {"a.csv", "b.csv"});
        CHECK(writer.has_earlier_set());
        CHECK(writer.unchanged_text(true) == "the earlier results in " + out + " are left as they were");
        CHECK(writer.unchanged_text(false) == "the earlier results in " + out + " are unchanged");
        writer.abandon();
        writer.abandon();  // twice: harmless
    }
    CHECK(link_text(out + "/.ap_results/current") == first);
    CHECK(names_in(out + "/.ap_results") == strings{"current", "lock", first});  // the temporary set is gone

    write_set(out, "2\n", "second\n");
    const std::string second = link_text(out + "/.ap_results/current");
    CHECK(second != first);
    CHECK(read_text(out + "/a.csv") == "x,y\n2\n");
    // A reader that resolved `current` before the switch still reads the whole first set.
    CHECK(link_text(out + "/.ap_results/previous") == first);
    CHECK(read_text(out + "/.ap_results/" + first + "/a.csv") == "x,y\n1\n");
    CHECK(read_text(out + "/.ap_results/previous/b.csv") == "first\n");

    write_set(out, "3\n", "third\n");
    const std::string third = link_text(out + "/.ap_results/current");
    CHECK(link_text(out + "/.ap_results/previous") == second);
    CHECK(read_text(out + "/.ap_results/previous/a.csv") == "x,y\n2\n");
    CHECK(read_text(out + "/b.csv") == "third\n");
    // Kept for one run only: the first set is deleted.
    CHECK(names_in(out + "/.ap_results") == sorted({"current", "lock", "previous", second, third}));
}

TEST_CASE("result_set_writer: a write that fails leaves the earlier set current and no partial file", "[result_set]")
{
    temp_folder dir("set_fails");
    const std::string out = dir / "out";
    write_set(out, "old\n", "old b\n");
    const std::string old_set = link_text(out + "/.ap_results/current");

    // A child process whose files may not exceed 4 KiB writes a set whose b.csv is 64 KiB:
    // a.csv is written whole, b.csv fails part way (EFBIG, as a full disk gives ENOSPC).
    int message_pipe[2];
    REQUIRE(::pipe(message_pipe) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0)
    {
        ::close(message_pipe[0]);
        std::signal(SIGXFSZ, SIG_IGN);
        const struct rlimit limit = {4096, 4096};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        std::string message = "no error";
        try
        {
            result_set_writer writer(out, {"a.csv", "b.csv"});
            const std::string big(65536, 'b');
            writer.commit(two_files("new\n", big));
        }
        catch (const output_error& e)
        {
            message = e.what();
        }
        (void)!::write(message_pipe[1], message.data(), message.size());
        ::_exit(0);
    }
    ::close(message_pipe[1]);
    std::string message;
    char buffer[512];
    for (ssize_t n; (n = ::read(message_pipe[0], buffer, sizeof(buffer))) > 0;)
    {
        message.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(message_pipe[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));

    // The error names the file that could not be written and why.
    const std::string start = out + "/.ap_results/tmp-";
    const std::string end = "/b.csv: write failed: " + std::string(std::strerror(EFBIG));
    INFO(message);
    CHECK(message.rfind(start, 0) == 0);
    CHECK(message.size() > end.size());
    CHECK(message.compare(message.size() - end.size(), end.size(), end) == 0);

    // Nothing of the failed set remains; the names still read the whole earlier set.
    CHECK(link_text(out + "/.ap_results/current") == old_set);
    CHECK(names_in(out + "/.ap_results") == strings{"current", "lock", old_set});
    CHECK(names_in(out) == strings{".ap_results", "a.csv", "b.csv"});
    CHECK(read_text(out + "/a.csv") == "x,y\nold\n");
    CHECK(read_text(out + "/b.csv") == "old b\n");
}

TEST_CASE("result_set_writer: a second writer is refused at once, in this process or another", "[result_set]")
{
    temp_folder dir("set_lock");
    const std::string out = dir / "out";
    {
        result_set_writer first(out, {"a.csv", "b.csv"});
        CHECK(output_error_of([&] { result_set_writer second(out, {"a.csv", "b.csv"}); })
              == in_use_text(out, ::getpid()));
    }
    {
        result_set_writer again(out, {"a.csv", "b.csv"});  // the lock goes with the writer
    }

    // A child holds the folder until the parent closes the pipe it waits on.
    int ready[2], release[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(release) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0)
    {
        ::close(ready[0]);
        ::close(release[1]);
        int code = 0;
        try
        {
            result_set_writer holder(out, {"a.csv", "b.csv"});
            (void)!::write(ready[1], "r", 1);
            char c;
            (void)!::read(release[0], &c, 1);  // returns when the parent closes its end
        }
        catch (...)
        {
            code = 3;
            (void)!::write(ready[1], "e", 1);
        }
        ::_exit(code);
    }
    ::close(ready[1]);
    ::close(release[0]);
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    CHECK(c == 'r');
    const auto t0 = std::chrono::steady_clock::now();
    // The message names the child's pid: a forked child has its own identity (this_process()),
    // so its owner line names it ("pid N on HOST"); were the line stale, the holder found in
    // /proc/locks would be named instead ("pid N (COMMAND) on HOST holds its lock").
    const std::string refused = output_error_of([&] { result_set_writer second(out, {"a.csv", "b.csv"}); });
    INFO(refused);
    const std::string head = "output_dir '" + out + "' is in use by another run (pid " + std::to_string(child) + " ";
    const std::string tail = "); wait for it to finish or choose another --output-dir";
    CHECK(refused.rfind(head, 0) == 0);
    CHECK(refused.size() > head.size() + tail.size());
    CHECK(refused.compare(refused.size() - tail.size(), tail.size(), tail) == 0);
    CHECK(refused.find(" on " + plain_host_name()) != std::string::npos);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(waited < 2.0);  // refused, not waited for
    ::close(release[1]);
    ::close(ready[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    write_set(out, "after\n", "b\n");  // the child is gone: the folder is free
    CHECK(read_text(out + "/a.csv") == "x,y\nafter\n");
}

TEST_CASE("result_set_writer: things in the way are refused before any work, naming them, never followed",
          "[result_set]")
{
    temp_folder dir("set_refused");
    const std::string out = dir / "out";
    const std::string outside = dir / "outside.txt";
    write_text(outside, "not yours\n");

    SECTION("the output folder is a file")
    {
        CHECK(output_error_of([&] { result_set_writer w(outside, {"a.csv"}); })
              == "output_dir '" + outside + "' is a regular file, not a folder");
    }
    SECTION("a folder where a result goes")
    {
        fs::create_directories(out + "/a.csv");
        CHECK(output_error_of([&] { result_set_writer w(out, {"a.csv", "b.csv"}); })
              == out + "/a.csv: exists and is not a result file of this program (a folder); move it away or choose "
                       "another --output-dir");
        CHECK(names_in(out) == strings{".ap_results", "a.csv"});
        CHECK(names_in(out + "/.ap_results") == strings{"lock"});
    }
    SECTION("a symbolic link where a result goes")
    {
        fs::create_directories(out);
        fs::create_symlink(outside, out + "/b.csv");
        CHECK(output_error_of([&] { result_set_writer w(out, {"a.csv", "b.csv"}); })
              == out + "/b.csv: exists and is not a result file of this program (a symbolic link to '" + outside
                     + "'); move it away or choose another --output-dir");
        CHECK(link_text(out + "/b.csv") == outside);
    }
    SECTION("the lock is a symbolic link to a file elsewhere")
    {
        fs::create_directories(out + "/.ap_results");
        fs::create_symlink(outside, out + "/.ap_results/lock");
        CHECK(output_error_of([&] { result_set_writer w(out, {"a.csv"}); })
              == out + "/.ap_results/lock: is a symbolic link (to '" + outside
                     + "'), not this program's lock file; it is not followed (move it away)");
    }
    SECTION("the lock is a hard link to a file elsewhere")
    {
        fs::create_directories(out + "/.ap_results");
        fs::create_hard_link(outside, out + "/.ap_results/lock");
        CHECK(output_error_of([&] { result_set_writer w(out, {"a.csv"}); })
              == out + "/.ap_results/lock: has 2 names (a hard link to a file elsewhere?), not this program's lock "
                       "file; it is not written (move it away)");
    }
    SECTION("the lock is a FIFO: reported, not waited on")
    {
        fs::create_directories(out + "/.ap_results");
        REQUIRE(::mkfifo((out + "/.ap_results/lock").c_str(), 0644) == 0);
        CHECK(output_error_of([&] { result_set_writer w(out, {"a.csv"}); })
              == out + "/.ap_results/lock: is a FIFO, not this program's lock file (move it away)");
    }
    SECTION("the state folder is a symbolic link to a folder elsewhere")
    {
        fs::create_directories(out);
        fs::create_directories(dir / "elsewhere");
        fs::create_directory_symlink(dir / "elsewhere", out + "/.ap_results");
        CHECK(output_error_of([&] { result_set_writer w(out, {"a.csv"}); })
              == out + "/.ap_results: is not a folder; this program keeps its result sets there (move it away)");
        CHECK(names_in(dir / "elsewhere").empty());
    }
    SECTION("`current` is not a link")
    {
        fs::create_directories(out + "/.ap_results/current");
        CHECK(output_error_of([&] { result_set_writer w(out, {"a.csv"}); })
              == out + "/.ap_results/current: is not a symbolic link; move it away");
        CHECK(names_in(out) == strings{".ap_results"});
    }
    // Whatever was refused, the file elsewhere is as it was.
    CHECK(read_text(outside) == "not yours\n");
    CHECK(fs::is_regular_file(fs::symlink_status(outside)));
}

TEST_CASE("result_set_writer: an earlier version's files become the previous set, byte for byte", "[result_set]")
{
    temp_folder dir("set_legacy");
    const std::string out = dir / "out";
    write_text(out + "/a.csv", "old a\n");  // regular files, as versions before result sets wrote them
    write_text(out + "/notes.txt", "the user's\n");
    {
        result_set_writer writer(out, {"a.csv", "b.csv"});
        CHECK(writer.has_earlier_set());
        writer.commit(two_files("new\n", "new b\n"));
    }
    CHECK(names_in(out) == strings{".ap_results", "a.csv", "b.csv", "notes.txt"});
    CHECK(read_text(out + "/a.csv") == "x,y\nnew\n");
    CHECK(read_text(out + "/notes.txt") == "the user's\n");  // not a result name: untouched
    const std::string previous = link_text(out + "/.ap_results/previous");
    CHECK(previous.rfind("legacy-" + std::to_string(::getpid()) + "-", 0) == 0);
    CHECK(read_text(out + "/.ap_results/previous/a.csv") == "old a\n");
}

TEST_CASE("result_set_writer: leftovers of gone runs are removed, another host's left alone with a note",
          "[result_set]")
{
    temp_folder dir("set_leftovers");
    const std::string out = dir / "out";
    const std::string state = out + "/.ap_results/";
    write_text(state + "tmp-1-1-00000000-" + plain_host_name() + "/a.csv", "x");  // this host, another boot
    write_text(state + "set-4194321-5-abcd1234-otherhost/a.csv", "y");             // another host
    write_text(state + "readme", "z");                                            // not ours
    {
        result_set_writer writer(out, {"a.csv"});
        CHECK(writer.notes()
              == strings{"note: " + state + "set-4194321-5-abcd1234-otherhost was left by a run on host otherhost and is "
                                            "left alone (remove it if no run there writes into this folder)"});
        writer.commit({{"a.csv", {"1\n"}}});
    }
    const std::string current = link_text(state + "current");
    CHECK(names_in(state) == sorted({"current", "lock", "readme", current, "set-4194321-5-abcd1234-otherhost"}));
}

TEST_CASE("result_set_writer: links planted in the state folder are never followed", "[result_set]")
{
    temp_folder dir("set_planted");
    const std::string out = dir / "out";
    const std::string state = out + "/.ap_results/";
    write_text(dir / "elsewhere/a.csv", "keep\n");
    fs::create_directories(state);
    // `current` and `previous` naming a folder outside, and a leftover of a gone run (this host,
    // another boot) that is a link to it: the links are replaced or removed, the folder stays.
    fs::create_directory_symlink("../../elsewhere", state + "current");
    fs::create_directory_symlink("../../elsewhere", state + "previous");
    fs::create_directory_symlink(dir / "elsewhere", state + "tmp-1-1-00000000-" + plain_host_name());
    {
        result_set_writer writer(out, {"a.csv"});
        CHECK(writer.has_earlier_set());
        writer.commit({{"a.csv", {"new\n"}}});
    }
    const std::string current = link_text(state + "current");
    CHECK(current.rfind("set-", 0) == 0);
    CHECK(read_text(out + "/a.csv") == "new\n");
    CHECK(names_in(dir / "elsewhere") == strings{"a.csv"});
    CHECK(read_text(dir / "elsewhere/a.csv") == "keep\n");
    // Only a set of this program is kept as `previous`; the planted link is left as it was.
    CHECK(link_text(state + "previous") == "../../elsewhere");
    CHECK(names_in(state) == strings{"current", "lock", "previous", current});
}
