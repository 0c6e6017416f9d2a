// ap_bench_load (issue 16, item 7): the whole process against the analysis alone, for one
// Qwen-shaped head (50,000 queries and 50,000 keys, d = 128, float32), at one thread.
//
// The head is written once by ap_synth (the project's own dump writer) into WORK/dump. Then:
// - analysis: analyze_head under ap_analyze's default options on the head's tensors already in
//   memory (loaded and copied before the clock starts); and again on the views of the loaded
//   folders, which read the mapping of vector.npy in place;
// - process: `ap_analyze --data-root WORK/dump --output-dir ... --threads 1`, started and
//   waited for, as a user runs it: wall time, and CPU time (user + system) from wait4;
//   for each ap_analyze given (--analyze, and --baseline, e.g. an older build), and for
//   --analyze again with AP_NPY_MMAP=off (the vectors read into memory instead of mapped),
//   interleaved round by round so that a busy machine weighs on each alike.
// Every time is the minimum over the rounds (the machine is shared). The CSVs every variant
// writes are compared byte for byte. Prints one line per measurement and the ratios
// process / analysis. The page cache is warm (the dump was just written or read): the
// speed of the disk is the speed of the page cache here.
//
// With --dump DIR the head of DIR (layer 0, query head 0 and its keys) is used instead of
// the one ap_synth writes (issue 37 item 4: the 50-sequence head whose defaults compute the
// sequence-level errors), and --threads T runs both the analysis and the processes on T
// threads (ap_analyze --threads T: one head, so T threads inside it).
//
// usage: ap_bench_load (--synth AP_SYNTH | --dump DIR) --analyze AP_ANALYZE [--baseline AP_ANALYZE]
//                      [--rounds R] [--work DIR] [--threads T]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/io/npy_dump.hpp>
#include <attention_plasticity/pipeline.hpp>
#include <attention_plasticity/run/analyze_config.hpp>

namespace
{
namespace ap = attention_plasticity;
namespace fs = std::filesystem;

struct timing
{
    double wall = std::numeric_limits<double>::infinity();
    double cpu = std::numeric_limits<double>::infinity();

    void keep_min(double w, double c)
    {
        wall = std::min(wall, w);
        cpu = std::min(cpu, c);
    }
};

double seconds_of(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); }

double process_cpu_seconds()
{
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// Runs `argv` with stdout and stderr to `log` (and `env_off`: AP_NPY_MMAP=off); returns false
/// when it fails. Adds its wall and CPU seconds (children's rusage from wait4) to `t`.
bool run_process(const std::vector<std::string>& args, const std::string& log, bool env_off, timing& t)
{
    std::vector<char*> argv;
    for (const auto& a : args)
    {
        argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid < 0)
    {
        return false;
    }
    if (pid == 0)
    {
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
        {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (env_off)
        {
            setenv("AP_NPY_MMAP", "off", 1);
        }
        else
        {
            unsetenv("AP_NPY_MMAP");
        }
        execv(argv[0], argv.data());
        _exit(127);
    }
    int status = 0;
    rusage usage{};
    if (wait4(pid, &status, 0, &usage) != pid)
    {
        return false;
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    t.keep_min(wall, seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string file_text(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// A copy of a loaded folder's tokens in memory of their own (the analysis' input).
ap::head_tokens<float> tokens_in_memory(const ap::io::folder_data& f)
{
    const ap::tokens_view<float> v = f.view<float>();
    return ap::head_tokens<float>{v.vectors, v.position, v.bucket, v.example_id};
}
}  // namespace

int main(int argc, char** argv)
{
    std::string synth, analyze, baseline, work = "bench_load_work", given_dump;
    std::size_t rounds = 5, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2)
    {
        const std::string flag = argv[i];
        if (flag == "--synth")
            synth = argv[i + 1];
        else if (flag == "--analyze")
            analyze = argv[i + 1];
        else if (flag == "--baseline")
            baseline = argv[i + 1];
        else if (flag == "--rounds")
            rounds = std::max<std::size_t>(1, std::strtoull(argv[i + 1], nullptr, 10));
        else if (flag == "--work")
            work = argv[i + 1];
        else if (flag == "--dump")
            given_dump = argv[i + 1];
        else if (flag == "--threads")
            threads = std::max<std::size_t>(1, std::strtoull(argv[i + 1], nullptr, 10));
        else
        {
            std::fprintf(stderr, "ap_bench_load: unknown option %s\n", flag.c_str());
            return 2;
        }
    }
    if ((synth.empty() && given_dump.empty()) || analyze.empty() || argc % 2 == 0)
    {
        std::fprintf(stderr, "usage: ap_bench_load (--synth AP_SYNTH | --dump DIR) --analyze AP_ANALYZE "
                             "[--baseline AP_ANALYZE] [--rounds R] [--work DIR] [--threads T]\n");
        return 2;
    }
    std::printf("%s\n", ap::blas_report("ap_bench_load").c_str());
    const fs::path root = fs::absolute(work);
    const fs::path dump = given_dump.empty() ? root / "dump" : fs::absolute(given_dump);
    fs::create_directories(root);
    // The Qwen-shaped head: 50,000 tokens in 8 sequences, 12 buckets, d = 128, float32
    // (--true-pairs 1: the true AP ap_synth also writes is not used here, and exact it takes a minute).
    if (!fs::exists(dump / "l00h00k" / "vector.npy"))
    {
        timing ignored;
        if (!run_process({fs::absolute(synth).string(), "--out", dump.string(), "--num-layers", "1", "--num-q-heads",
                          "1", "--num-k-heads", "1", "--dim", "128", "--tokens", "50000", "--examples", "8",
                          "--buckets", "12", "--true-pairs", "1", "--threads", "1"},
                         (root / "synth.log").string(), false, ignored))
        {
            std::fprintf(stderr, "ap_bench_load: ap_synth failed, see %s\n", (root / "synth.log").c_str());
            return 1;
        }
    }

    struct variant
    {
        std::string name;
        std::string program;
        bool mmap_off;
        timing t;
    };
    std::vector<variant> variants = {{"process (mapped)", fs::absolute(analyze).string(), false, {}},
                                     {"process (AP_NPY_MMAP=off, read)", fs::absolute(analyze).string(), true, {}}};
    if (!baseline.empty())
    {
        variants.push_back({"process (--baseline)", fs::absolute(baseline).string(), false, {}});
    }
    timing analysis, analysis_mapped;
    try
    {
        const ap::io::folder_data qf = ap::io::load_folder((dump / "l00h00q").string(), true);
        const ap::io::folder_data kf = ap::io::load_folder((dump / "l00h00k").string(), false);
        const ap::head_tokens<float> queries = tokens_in_memory(qf);
        const ap::head_tokens<float> keys = tokens_in_memory(kf);
        ap::head_options options = ap::run::analyze_default_options();
        options.threads = threads;
        options.sliding_window = qf.sliding_window;
        for (std::size_t r = 0; r < rounds; ++r)
        {
            // The analysis on the copies in memory, and the same reading the mapping in place (as
            // ap_analyze does: 4 KiB pages of the page cache instead of the heap's), in turn first
            // (the second of a round finds the caches warm).
            std::size_t cells[2] = {0, 0};
            for (std::size_t k = 0; k < 2; ++k)
            {
                const bool on_mapping = (k + r) % 2 == 1;
                const double cpu0 = process_cpu_seconds();
                const auto start = std::chrono::steady_clock::now();
                const ap::head_result result =
                    on_mapping ? ap::analyze_head(qf.view<float>(), kf.view<float>(), ap::head_id{0, 0, 0}, options)
                               : ap::analyze_head(queries, keys, ap::head_id{0, 0, 0}, options);
                const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                (on_mapping ? analysis_mapped : analysis).keep_min(wall, process_cpu_seconds() - cpu0);
                cells[on_mapping ? 1 : 0] = result.cells.size();
            }
            if (cells[0] == 0 || cells[0] != cells[1])
            {
                std::fprintf(stderr, "ap_bench_load: the head has no cells, or not the same from the mapping\n");
                return 1;
            }
            // The processes, interleaved with the analysis rounds.
            for (std::size_t v = 0; v < variants.size(); ++v)
            {
                const fs::path out = root / ("out" + std::to_string(v));
                if (!run_process({variants[v].program, "--data-root", dump.string(), "--output-dir", out.string(),
                                  "--threads", std::to_string(threads)},
                                 (root / ("log" + std::to_string(v))).string(), variants[v].mmap_off, variants[v].t))
                {
                    std::fprintf(stderr, "ap_bench_load: %s failed, see %s\n", variants[v].program.c_str(),
                                 (root / ("log" + std::to_string(v))).c_str());
                    return 1;
                }
            }
        }
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "ap_bench_load: %s\n", e.what());
        return 1;
    }
    // The same rows from every variant.
    bool identical = true;
    for (const auto& entry : fs::directory_iterator(root / "out0"))
    {
        if (entry.path().extension() != ".csv")
        {
            continue;
        }
        for (std::size_t v = 1; v < variants.size(); ++v)
        {
            if (file_text(entry.path()) != file_text(root / ("out" + std::to_string(v)) / entry.path().filename()))
            {
                std::printf("DIFFERS: %s of %s\n", entry.path().filename().c_str(), variants[v].name.c_str());
                identical = false;
            }
        }
    }
    std::printf("one head (%s), --threads %zu; min of %zu rounds\n",
                given_dump.empty() ? "50000 queries and keys, d = 128, float32" : dump.c_str(), threads, rounds);
    std::printf("%-34s %9s %9s %12s %12s\n", "", "wall ms", "cpu ms", "wall/anal.", "cpu/anal.");
    std::printf("%-34s %9.1f %9.1f\n", "analysis alone (analyze_head)", 1e3 * analysis.wall, 1e3 * analysis.cpu);
    std::printf("%-34s %9.1f %9.1f %12.3f %12.3f\n", "analysis on the mapped folder", 1e3 * analysis_mapped.wall,
                1e3 * analysis_mapped.cpu, analysis_mapped.wall / analysis.wall, analysis_mapped.cpu / analysis.cpu);
    for (const auto& v : variants)
    {
        std::printf("%-34s %9.1f %9.1f %12.3f %12.3f\n", v.name.c_str(), 1e3 * v.t.wall, 1e3 * v.t.cpu,
                    v.t.wall / analysis.wall, v.t.cpu / analysis.cpu);
    }
    std::printf("CSVs of every variant byte-identical: %s\n", identical ? "yes" : "NO");
    return identical ? 0 : 1;
}
