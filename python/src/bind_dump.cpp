// The dump analysis of ap_analyze for Python (attention_plasticity.analyze_dump and
// `python -m attention_plasticity`): the same option table (analyze_config.hpp) and the same
// run from its configuration to its result set (analysis_run.hpp: the head selection, the
// shard of --shard I/N with its shard.json, the run over the heads, the rows, the result-set
// writer) as the C++ program. Added here: qk-sniffer's Parquet folders, read by a Python
// function (pyarrow) and analyzed in place, and weighed for the shard plan by the rows their
// footer announces; the GIL released while heads run, progress and Ctrl-C from the calling
// thread.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <dlfcn.h>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/detail/blas.hpp>
#include <attention_plasticity/io/csv_rows.hpp>
#include <attention_plasticity/io/fs_util.hpp>
#include <attention_plasticity/run/analysis_run.hpp>
#include <attention_plasticity/run/analyze_config.hpp>
#include <attention_plasticity/run/config.hpp>
#include <attention_plasticity/run/dump_layout.hpp>
#include <attention_plasticity/run/head_runner.hpp>
#include <attention_plasticity/run/influence_table.hpp>
#include <attention_plasticity/run/output_folder.hpp>
#include <attention_plasticity/run/result_set.hpp>
#include <attention_plasticity/run/result_set_reader.hpp>
#include <attention_plasticity/run/run_report.hpp>
#include <attention_plasticity/run/shard_plan.hpp>

#include "common.hpp"
#include "head_bindings.hpp"


namespace ap_python
{
namespace
{
    namespace run = attention_plasticity::run;
    namespace io = attention_plasticity::io;
    namespace fs = std::filesystem;

    constexpr const char* parquet_file = "data.parquet";

    /// Python arrays that views point into: released with the GIL held, from any thread.
    struct python_arrays
    {
        array_arg vectors;
        array_arg position;
        array_arg bucket;
        array_arg example_id;
        array_arg sliding_window;

        ~python_arrays()
        {
            nb::gil_scoped_acquire gil;
            vectors = {};
            position = {};
            bucket = {};
            example_id = {};
            sliding_window = {};
        }
    };

    /// "FILE: reason" of a reader's exception as (file, reason); `file` when it names no file.
    std::pair<std::string, std::string> split_message(const std::string& message, const std::string& file)
    {
        if (message.compare(0, file.size() + 2, file + ": ") == 0)
        {
            return {file, message.substr(file.size() + 2)};
        }
        return {file, message};
    }

    /// One head folder read by a Python function, `reader(folder)` -> {vector, position, bucket,
    /// example_id[, sliding_window]}: qk-sniffer's Parquet layout (docs/method.md §1.2, read by
    /// attention_plasticity.sniffed with pyarrow; `file` its data.parquet) or a folder held in
    /// memory (profile_model's capture; `file` the folder's name). Checked as load_folder checks
    /// NPY folders; `fn` names the function the user called.
    run::loaded_folder load_python_folder(const std::string& folder, const std::string& file, bool with_sliding_window,
                                         const nb::object& reader, const char* fn)
    {
        auto arrays = std::make_shared<python_arrays>();
        {
            nb::gil_scoped_acquire gil;
            nb::dict data;
            try
            {
                data = nb::cast<nb::dict>(reader(folder));
            }
            catch (nb::python_error& e)
            {
                if (e.matches(PyExc_MemoryError))
                {
                    throw std::bad_alloc();
                }
                const auto [where, reason] = split_message(nb::cast<std::string>(nb::str(e.value())), file);
                throw io::input_error(where, reason);
            }
            arrays->vectors = float_array(data["vector"], fn, "vector", 2);
            arrays->position = int64_array(data["position"], fn, "position");
            arrays->bucket = int64_array(data["bucket"], fn, "bucket");
            arrays->example_id = int64_array(data["example_id"], fn, "example_id");
            nb::object window = data.contains("sliding_window") ? nb::object(data["sliding_window"]) : nb::none();
            if (with_sliding_window && !window.is_none())
            {
                arrays->sliding_window = int64_array(window, fn, "sliding_window");
            }
        }
        const array_arg& v = arrays->vectors;
        const std::size_t n = v.shape[0];
        const std::size_t d = v.shape[1];
        if (d > io::max_head_dim)
        {
            throw io::input_error(file, "column 'vector': vectors have d = " + std::to_string(d)
                                            + " columns, more than the limit " + std::to_string(io::max_head_dim)
                                            + " of a head dimension");
        }
        for (const auto& [column, name] : {std::pair<const array_arg*, const char*>{&arrays->position, "position"},
                                           {&arrays->bucket, "bucket"},
                                           {&arrays->example_id, "example_id"}})
        {
            if (column->size() != n)
            {
                throw io::input_error(file, std::string("column '") + name + "' has " + std::to_string(column->size())
                                                + " rows but 'vector' has " + std::to_string(n));
            }
        }
        io::check_positions(view<std::int64_t, 1>(arrays->position), file, "column 'position': ");
        using views = run::loaded_folder::tokens_type;
        auto tokens = [&](auto tag) {
            using T = std::remove_pointer_t<decltype(tag)>;
            return ap::tokens_view<T>{view<T, 2>(v), view<std::int64_t, 1>(arrays->position),
                                      view<std::int64_t, 1>(arrays->bucket), view<std::int64_t, 1>(arrays->example_id)};
        };
        run::loaded_folder out(v.is_float32 ? views(tokens(static_cast<float*>(nullptr)))
                                           : views(tokens(static_cast<double*>(nullptr))));
        out.folder = folder;
        out.vector_file = file;
        out.n = n;
        out.d = d;
        if (arrays->sliding_window.data != nullptr)
        {
            out.sliding_window = io::sliding_window_of(view<std::int64_t, 1>(arrays->sliding_window), file,
                                                       "column 'sliding_window': ");
        }
        out.owner = std::move(arrays);
        return out;
    }

    /// The folder loader of a Python run: Parquet where the folder holds data.parquet, NPY
    /// otherwise (docs/method.md §1.1-1.2).
    run::folder_loader dump_loader(nb::object reader)
    {
        return [reader = std::move(reader)](const std::string& folder, bool with_sliding_window) {
            const std::string parquet = (fs::path(folder) / parquet_file).string();
            if (!io::inspect_path(parquet).absent)
            {
                return load_python_folder(folder, parquet, with_sliding_window, reader, "analyze_dump");
            }
            const std::string npy = (fs::path(folder) / "vector.npy").string();
            if (io::inspect_path(folder).is_directory && io::inspect_path(npy).absent)
            {
                throw io::input_error(npy, "not found, nor is data.parquet: the folder holds neither the NPY layout "
                                           "nor qk-sniffer's Parquet layout");
            }
            return run::load_npy_folder(folder, with_sliding_window);
        };
    }

    /// The folder loader of a run over folders held in memory (DumpRun.from_memory): every folder
    /// is read by `reader`.
    run::folder_loader memory_loader(nb::object reader, std::string fn)
    {
        return [reader = std::move(reader), fn = std::move(fn)](const std::string& folder, bool with_sliding_window) {
            return load_python_folder(folder, folder, with_sliding_window, reader, fn.c_str());
        };
    }

    /// Sets BLAS to one thread for a run, and back.
    class single_threaded_blas
    {
    public:
        single_threaded_blas() : m_before(openblas_get_num_threads()) { openblas_set_num_threads(1); }
        ~single_threaded_blas() { openblas_set_num_threads(m_before); }
        single_threaded_blas(const single_threaded_blas&) = delete;
        single_threaded_blas& operator=(const single_threaded_blas&) = delete;

    private:
        int m_before;
    };

    /// The shard plan's view of a folder (shard_plan.hpp): data.parquet where the folder holds
    /// one (its rows from the Parquet footer, through `parquet_rows`: a Python function, called
    /// with the GIL held; None: pyarrow's footer read here, the one home of that count, so that
    /// this module needs nothing of the Python package it sits in), else the NPY layout's
    /// vector.npy, as dump_loader reads them.
    run::folder_probe dump_probe(nb::object parquet_rows)
    {
        return [parquet_rows = std::move(parquet_rows)](const std::string& folder) {
            const std::string file = (fs::path(folder) / parquet_file).string();
            const io::path_info info = io::inspect_path(file);
            if (info.absent)
            {
                return run::probe_npy_folder(folder);
            }
            if (!info.is_regular)
            {
                return run::vector_file_probe{};  // a FIFO is never opened (no wait); the head reports it
            }
            run::vector_file_probe probe;
            try
            {
                const nb::object rows =
                    parquet_rows.is_none()
                        ? nb::module_::import_("pyarrow.parquet").attr("read_metadata")(file).attr("num_rows")
                        : parquet_rows(file);
                probe.rows = nb::cast<std::uint64_t>(rows);
            }
            catch (nb::python_error& e)
            {
                if (e.matches(PyExc_KeyboardInterrupt) || e.matches(PyExc_MemoryError))
                {
                    throw;
                }
                probe.rows = 0;  // analyzing the head reports what is wrong
            }
            catch (const nb::cast_error&)
            {
                probe.rows = 0;
            }
            return probe;
        };
    }

    /// One run of the dump analysis: ap_analyze's (analysis_run.hpp), configured and planned
    /// when made (usage errors before any work, the output folder checked and locked), then
    /// run here with the GIL released, progress and Ctrl-C handled from the calling thread.
    class dump_run
    {
    public:
        dump_run(run::analyze_config config, bool write, nb::object parquet_rows)
            : m_run(std::move(config), dump_probe(std::move(parquet_rows)))
        {
            if (write)
            {
                m_run.open_output();
            }
        }

        /// A run over folders held in memory (no output folder: write_to writes a copy).
        dump_run(run::analyze_config config, run::dump_scan folders, std::string function,
                 const std::optional<std::string>& examples_csv, const std::string& capture_json)
            : m_run(std::move(config), std::move(folders), examples_csv, capture_json),
              m_memory_function(std::move(function))
        {
        }

        const run::analysis_run& engine() const { return m_run; }

        /// Analyzes every head of the plan (GIL released); calls on_progress(done, failures)
        /// from this thread with the failures that came in since the last call, as tuples
        /// (index, layer, q_head, k_head, file, reason); Ctrl-C stops the run (no new head).
        void run(nb::object reader, nb::object on_progress)
        {
            if (m_run.has_run())
            {
                throw std::invalid_argument("analyze_dump: a run is analyzed once");
            }
            const run::folder_loader loader = m_memory_function.empty() ? dump_loader(std::move(reader))
                                                                       : memory_loader(std::move(reader), m_memory_function);
            std::mutex mutex;
            std::condition_variable changed;
            std::size_t done = 0;
            bool finished = false;
            std::vector<std::size_t> fresh_failures;
            std::exception_ptr error;
            std::atomic<bool> stop{false};
            auto on_done = [&](std::size_t index, const run::head_task&, const run::head_failure* failure) {
                std::lock_guard<std::mutex> lock(mutex);
                ++done;
                if (failure != nullptr)
                {
                    fresh_failures.push_back(index);
                }
                changed.notify_all();
            };
            single_threaded_blas blas;
            auto work = [&] {
                try
                {
                    m_run.run(loader, on_done, &stop);
                }
                catch (...)
                {
                    error = std::current_exception();
                }
                std::lock_guard<std::mutex> lock(mutex);
                finished = true;
                changed.notify_all();
            };
            std::thread runner;
            try
            {
                runner = std::thread(work);
            }
            catch (const std::system_error& e)
            {
                // No thread can be started (a process limit): said in words, nothing analyzed.
                throw std::runtime_error("analyze_dump: cannot start the thread that runs the heads ("
                                         + e.code().message() + "); nothing was analyzed");
            }
            auto join = [&] {
                nb::gil_scoped_release release;
                runner.join();
            };
            std::size_t reported = static_cast<std::size_t>(-1);
            for (;;)
            {
                bool all_done = false;
                std::size_t now_done = 0;
                std::vector<std::size_t> failures;
                {
                    nb::gil_scoped_release release;
                    std::unique_lock<std::mutex> lock(mutex);
                    changed.wait_for(lock, std::chrono::milliseconds(100),
                                     [&] { return finished || done != reported || !fresh_failures.empty(); });
                    all_done = finished;
                    now_done = done;
                    failures.swap(fresh_failures);
                }
                try
                {
                    if (PyErr_CheckSignals() != 0)
                    {
                        throw nb::python_error();
                    }
                    if (!on_progress.is_none() && (now_done != reported || !failures.empty()))
                    {
                        on_progress(now_done, failure_tuples(failures));
                    }
                }
                catch (...)
                {
                    stop = true;
                    join();
                    throw;
                }
                reported = now_done;
                if (all_done)
                {
                    break;
                }
            }
            join();
            if (error)
            {
                std::rethrow_exception(error);
            }
        }

        nb::list failure_tuples(const std::vector<std::size_t>& indices) const
        {
            nb::list out;
            for (std::size_t index : indices)
            {
                const run::head_task& task = m_run.plan().heads[index];
                const run::head_failure& failure = *m_run.state().failures[index];
                out.append(nb::make_tuple(index, task.layer, task.q_head, task.k_head, failure.file, failure.reason,
                                          run::failure_line(task, failure)));
            }
            return out;
        }

        nb::list all_failures() const
        {
            std::vector<std::size_t> indices;
            const auto& failures = m_run.state().failures;
            for (std::size_t i = 0; i < failures.size(); ++i)
            {
                if (failures[i])
                {
                    indices.push_back(i);
                }
            }
            return failure_tuples(indices);
        }

        /// {table name: header + rows of the analyzed heads in (layer, q_head) order}: the bytes
        /// of each CSV as it is written.
        nb::dict tables_text() const { return ap_python::tables_text(run::analyzed_rows(m_run.state())); }

        /// {table name: {column: array}} of the analyzed heads in (layer, q_head) order: the numbers
        /// the CSVs are written from (the run keeps each head's result, analyze_config::keep_results).
        nb::dict columns() const
        {
            std::vector<const ap::head_result*> results;
            for (const io::head_rows* rows : run::analyzed_rows(m_run.state()))
            {
                if (!rows->result)
                {
                    throw std::logic_error("DumpRun.columns: the run did not keep its heads' results");
                }
                results.push_back(rows->result.get());
            }
            return result_columns(results);
        }

        /// Writes the result set (analysis_run::commit, as ap_analyze does). Returns whether a
        /// set was written.
        bool commit()
        {
            if (!m_run.writes())
            {
                throw std::invalid_argument("analyze_dump: this run has no output_dir");
            }
            return without_gil([&] { return m_run.commit(); });
        }

        /// Writes the result set and makes the closing report (analysis_run::finish, as ap_analyze
        /// ends): (lines, exit status).
        std::pair<std::vector<std::string>, int> finish()
        {
            if (!m_run.writes())
            {
                throw std::invalid_argument("analyze_dump: this run has no output_dir");
            }
            run::run_report report = without_gil([&] { return m_run.finish(); });
            return {std::move(report.lines), report.exit_status};
        }

        /// Writes the result set into another folder (a writer of its own, as ap_analyze's).
        bool write_to(const std::string& output_dir) const
        {
            return without_gil([&] { return m_run.write_to(output_dir); });
        }

        /// Drops the temporary set (if not written) and the lock on the output folder.
        void close() { m_run.close(); }

    private:
        run::analysis_run m_run;
        std::string m_memory_function;  // the Python function of a run over folders in memory ("" a dump)
    };

    /// The configuration of analyze_dump(data_root, output_dir, config=..., **options): the
    /// --config file first, then the options by key (a key of the option table), then the
    /// arguments. Returns whether results are to be written (an output_dir given here or in the
    /// file).
    std::pair<run::analyze_config, bool> configure(const std::string& data_root, nb::handle output_dir,
                                                  nb::handle config_file, const nb::dict& options,
                                                  const char* fn = "analyze_dump",
                                                  const ap::head_options* base = nullptr)
    {
        const auto& table = run::analyze_options();
        run::analyze_config config;
        if (base != nullptr)
        {
            config.options = *base;  // the keywords below are set on it
        }
        config.output_dir.clear();  // set only by the file or the argument
        if (!config_file.is_none())
        {
            const std::string path = option_text("config", config_file, false);
            run::apply_yaml(config, table, run::read_config_file(path, "config"), path);
        }
        for (const auto& [key_object, value] : options)
        {
            const std::string key = nb::cast<std::string>(key_object);
            const auto* option = run::find_option(table, key);
            if (option == nullptr || key == "data_root" || key == "output_dir")
            {
                throw run::usage_error(std::string(fn) + ": "
                                      + run::unknown_name_message("keyword", key, table,
                                                                 [](const std::string& name) { return name; })
                                      + " (the options of ap_analyze, as keywords: see help(attention_plasticity."
                                      + fn + "))");
            }
            if (value.is_none())
            {
                continue;
            }
            set_option_value(*option, config, key, value, fn);
        }
        run::find_option(table, "data_root")->set(config, "data_root", data_root);
        if (!output_dir.is_none())
        {
            run::find_option(table, "output_dir")
                ->set(config, "output_dir", option_text("output_dir", output_dir, false));
        }
        config.words.flags = false;  // messages name the keywords (option_words)
        config.keep_results = true;  // DumpResult's DataFrames are made from the numbers (DumpRun.columns)
        const bool write = !config.output_dir.empty();
        if (!write)
        {
            config.output_dir = ".";
        }
        return {std::move(config), write};
    }

    nb::dict layout_dict(const run::dump_layout& layout)
    {
        nb::dict out;
        out["num_layers"] = layout.num_layers;
        out["num_q_heads"] = layout.num_q_heads;
        out["num_k_heads"] = layout.num_k_heads;
        out["origin"] = layout.origin;
        return out;
    }

    std::string blas_library()
    {
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(&cblas_dgemm), &info) == 0 || info.dli_fname == nullptr)
        {
            return "";
        }
        return info.dli_fname;
    }
}  // namespace

void bind_dump(nb::module_& m)
{
    m.def(
        "analyze_options",
        [] {
            nb::list out;
            for (const auto& option : run::analyze_options())
            {
                out.append(nb::make_tuple(option.name, run::flag_of(option.name), option.metavar, option.help,
                                          option.takes_list));
            }
            return out;
        },
        "The options of ap_analyze (one table for the command line, the --config file and analyze_dump): a list\n"
        "of (key, flag, metavar, help, takes_list); the help ends with the default in brackets.");
    m.def("analyze_default_options", &run::analyze_default_options,
          "The HeadOptions of ap_analyze and analyze_dump when no option is given: the library's defaults\n"
          "(HeadOptions()) with the confidence intervals of docs/method.md §8.3 on. Returns a new HeadOptions.");
    m.def(
        "analyze_help", [](const std::string& program) { return run::analyze_help(program.c_str(), true); }, "program"_a,
        "The --help text of ap_analyze, for `program`.");

    nb::class_<dump_run>(
        m, "DumpRun",
        "One run of the dump analysis (the engine of analyze_dump and of python -m attention_plasticity):\n"
        "ap_analyze's own (include/attention_plasticity/run/analysis_run.hpp). Made from options, it has checked them, read the\n"
        "layout and planned the heads, those of its shard with `shard` (UsageError otherwise) and, when it\n"
        "writes, checked and locked the output folder (OutputError). parquet_rows(file) -> int: the rows a\n"
        "data.parquet announces, which the shard plan weighs (None: the footer's count, read with pyarrow).")
        .def_static(
            "from_options",
            [](const std::string& data_root, nb::handle output_dir, nb::handle config, const nb::dict& options,
               nb::object parquet_rows) {
                try
                {
                    auto [cfg, write] = configure(data_root, output_dir, config, options);
                    return new dump_run(std::move(cfg), write, std::move(parquet_rows));
                }
                catch (const run::usage_error& e)
                {
                    // The run layer named the options as keywords (config.words); the function is named here.
                    const std::string message = e.what();
                    throw run::usage_error(message.rfind("analyze_dump: ", 0) == 0 ? message : "analyze_dump: " + message);
                }
            },
            "data_root"_a, "output_dir"_a = nb::none(), "config"_a = nb::none(), "options"_a = nb::dict(),
            "parquet_rows"_a = nb::none(), nb::rv_policy::take_ownership,
            "A run configured as analyze_dump(data_root, output_dir, config=..., **options) is.")
        .def_static(
            "from_memory",
            [](const std::string& name, const std::vector<std::pair<std::size_t, std::size_t>>& query_folders,
               const std::vector<std::pair<std::size_t, std::size_t>>& key_folders,
               std::tuple<std::size_t, std::size_t, std::size_t> layout, const nb::dict& options,
               std::optional<ap::head_options> head_options, const std::string& function,
               std::optional<std::string> examples_csv, std::optional<std::string> capture_json) {
                const std::string fn = function.empty() ? std::string("profile_model") : function;
                try
                {
                    auto cfg = configure(name, nb::none(), nb::none(), options, fn.c_str(),
                                         head_options ? &*head_options : nullptr)
                                   .first;
                    cfg.layout.num_layers = std::get<0>(layout);
                    cfg.layout.num_q_heads = std::get<1>(layout);
                    cfg.layout.num_k_heads = std::get<2>(layout);
                    run::dump_scan folders;
                    folders.query = query_folders;
                    folders.key = key_folders;
                    return new dump_run(std::move(cfg), std::move(folders), fn, examples_csv,
                                        capture_json.value_or(""));
                }
                catch (const io::input_error& e)
                {
                    // examples_csv or capture_json refused (the file it names is the argument).
                    throw std::invalid_argument(fn + ": " + e.what());
                }
                catch (const run::usage_error& e)
                {
                    const std::string message = e.what();
                    throw run::usage_error(message.rfind(fn + ": ", 0) == 0 ? message : fn + ": " + message);
                }
            },
            "name"_a, "query_folders"_a, "key_folders"_a, "layout"_a, "options"_a = nb::dict(),
            "head_options"_a = nb::none(), "function"_a = "profile_model", "examples_csv"_a = nb::none(),
            "capture_json"_a = nb::none(), nb::rv_policy::take_ownership,
            "A run over head folders held in memory (profile_model, profile_vectors): query_folders and\n"
            "key_folders list the (layer, head) folders present, layout is (num_layers, num_q_heads,\n"
            "num_k_heads); options are analyze_dump's keywords (set on head_options when given, else on\n"
            "ap_analyze's defaults); `name` stands for the dump in messages (the folders are\n"
            "NAME/l{LL}h{HH}q|k). run(reader, on_progress) reads every folder with reader(folder) -> dict of\n"
            "arrays, as a Parquet folder's; write_to(dir) writes the result set. examples_csv: the text of the\n"
            "dump's examples.csv (docs/method.md §1.1: the document of each example, the sampling unit of\n"
            "§8.3; None: each example is its own document); capture_json: the text of a JSON object recorded\n"
            "in run.json's \"capture\" (how the examples were chosen). A bad examples_csv or capture_json:\n"
            "InvalidArgumentError naming it, the line and the value.")
        .def_static(
            "from_command_line",
            [](const std::vector<std::string>& argv, nb::object parquet_rows) -> dump_run* {
                std::vector<const char*> args;
                for (const auto& a : argv)
                {
                    args.push_back(a.c_str());
                }
                const auto parsed = run::parse_analyze_command_line(static_cast<int>(args.size()), args.data());
                if (!parsed)
                {
                    return nullptr;
                }
                return new dump_run(*parsed, true, std::move(parquet_rows));
            },
            "argv"_a, "parquet_rows"_a = nb::none(), nb::rv_policy::take_ownership,
            "A run configured by ap_analyze's command line (argv[0] is the program); None for --help.")
        .def_prop_ro("data_root", [](const dump_run& r) { return r.engine().config().data_root; }, "The dump's folder.")
        .def_prop_ro("output_dir",
                     [](const dump_run& r) {
                         return r.engine().writes() ? std::optional<std::string>(r.engine().config().output_dir)
                                                    : std::nullopt;
                     },
                     "Where the run writes its result set; None when it does not write.")
        .def_prop_ro("threads", [](const dump_run& r) { return r.engine().threads(); }, "Worker threads of the run.")
        .def_prop_ro("layout", [](const dump_run& r) { return layout_dict(r.engine().plan().layout); },
                     "num_layers, num_q_heads, num_k_heads and where they come from.")
        .def_prop_ro(
            "heads",
            [](const dump_run& r) {
                nb::list out;
                for (const auto& h : r.engine().plan().heads)
                {
                    out.append(nb::make_tuple(h.layer, h.q_head, h.k_head));
                }
                return out;
            },
            "The heads to analyze (the shard's, with `shard`), (layer, q_head, k_head) in order.")
        .def_prop_ro("present_heads", [](const dump_run& r) { return r.engine().plan().present_heads; },
                     "Query heads of the layout present in the dump (any selection).")
        .def_prop_ro("layout_heads", [](const dump_run& r) { return r.engine().plan().layout_heads; },
                     "num_layers x num_q_heads.")
        .def_prop_ro("shard",
                     [](const dump_run& r) {
                         const auto& shard = r.engine().config().shard;
                         return shard ? std::optional<std::string>(shard->text()) : std::nullopt;
                     },
                     "'I/N' when the run is shard I of N (docs/method.md §8.4), else None.")
        .def_prop_ro("plan_line", [](const dump_run& r) { return r.engine().plan_line(); },
                     "The first line ap_analyze prints for this run.")
        .def_prop_ro("shard_line",
                     [](const dump_run& r) {
                         return r.engine().shard() ? std::optional<std::string>(r.engine().shard_line())
                                                   : std::nullopt;
                     },
                     "The line ap_analyze prints about the run's shard (None without one).")
        .def("notes", [](const dump_run& r) { return r.engine().notes(); },
             "Notes of the output folder's writer (leftovers of other runs, ...).")
        .def_prop_ro("units", [](const dump_run& r) { return std::string(r.engine().units()); },
                     "The sampling unit's source (run.json \"units\"): 'documents' when the dump has examples.csv\n"
                     "(or examples_csv was given), else 'examples' (each example its own document, §8.3).")
        .def_prop_ro("units_note",
                     [](const dump_run& r) {
                         return r.engine().examples() ? std::optional<std::string>()
                                                      : std::optional<std::string>(run::no_examples_note);
                     },
                     "The note of a run without examples.csv (docs/method.md §8.3), None with one.")
        .def_prop_ro("examples_csv",
                     [](const dump_run& r) {
                         return r.engine().examples() ? std::optional<std::string>(io::examples_csv_text(*r.engine().examples()))
                                                      : std::optional<std::string>();
                     },
                     "The text of the run's examples.csv (docs/method.md §1.1), None without one: a comparison\n"
                     "checks pairing from its document fingerprints (§8.6).")
        .def("run", &dump_run::run, "parquet_reader"_a, "on_progress"_a = nb::none(),
             "Analyzes the heads on the run's threads with the GIL released. parquet_reader(folder) -> dict of\n"
             "arrays (attention_plasticity.sniffed.read_sniffed_folder) reads Parquet folders;\n"
             "on_progress(done, failures) is called from this thread.")
        .def_prop_ro("analyzed", [](const dump_run& r) { return r.engine().analyzed(); }, "Heads analyzed.")
        .def_prop_ro("failed", [](const dump_run& r) { return r.engine().failed(); }, "Heads that failed.")
        .def_prop_ro("has_results", [](const dump_run& r) { return r.engine().has_results(); },
                     "Whether there is a result set to write: some head analyzed, or a shard (whose set, with\n"
                     "its shard.json, is written even without rows, so that ap_merge sees it finished).")
        .def("failures", &dump_run::all_failures,
             "The failed heads: (index, layer, q_head, k_head, file, reason, line), in (layer, q_head) order.")
        .def("columns", &dump_run::columns,
             "{table name: {column: NumPy array}} of the analyzed heads (a run made by from_options), the\n"
             "numbers the CSVs are written from, in their columns' order and types.")
        .def("tables_text", &dump_run::tables_text,
             "{table name: the bytes of its CSV (header and rows)}, as ap_analyze writes them.")
        .def("commit", &dump_run::commit,
             "Writes the result set (as ap_analyze, with shard.json for a shard); False when there is none\n"
             "(has_results).")
        .def("finish", &dump_run::finish,
             "Writes the result set (commit) and returns the closing report every front end prints, as\n"
             "(lines, exit_status): each line goes after 'PROGRAM: ' on stderr (the counts, and why nothing\n"
             "was written when so); exit_status is ap_analyze's (0, or 1: a head failed, no set written).")
        .def("write_to", &dump_run::write_to, "output_dir"_a,
             "Writes the result set into output_dir (a writer of its own); False when there is none.")
        .def("has_earlier_set", [](const dump_run& r) { return r.engine().has_earlier_set(); },
             "Whether the output folder held a result set before.")
        .def(
            "unchanged_text",
            [](const dump_run& r, bool nothing_to_write) { return r.engine().unchanged_text(nothing_to_write); },
            "nothing_to_write"_a,
            "The output folder after a run that wrote no new set, as ap_analyze ends its message: with\n"
            "nothing_to_write (no head analyzed) 'the earlier results in DIR are left as they were' or 'nothing\n"
            "was written to DIR'; else (the set could not be written) 'the earlier results in DIR are\n"
            "unchanged' or 'no results were written to DIR'.")
        .def("close", &dump_run::close, "Releases the output folder (its lock and an unwritten temporary set).")
        .def(
            "head_results",
            [](const dump_run& r) {
                std::vector<py_head_result> out;
                for (const io::head_rows* rows : run::analyzed_rows(r.engine().state()))
                {
                    if (rows->result)
                    {
                        out.push_back(py_head_result{*rows->result, std::nullopt});
                    }
                }
                return out;
            },
            "The HeadResult of every analyzed head, in (layer, q_head) order (copies).")
        .def("counts_text", [](const dump_run& r) { return r.engine().counts_text(); },
             "'P of the L query heads of the layout present: ...'.");

    m.def(
        "_read_result_set",
        [](const std::string& folder, const std::vector<std::string>& names, bool influence_columns) {
            // The one reader of result folders (result_set_reader.hpp): the shared lock, the
            // current set resolved once, each file bounded (a quarter of memory, as ap_compare).
            // With influence_columns, the influence table is read as columns, bounded by the set's
            // heads and documents (run/influence_table.hpp, docs/method.md §8.6).
            std::vector<std::pair<std::string, std::string>> out;
            std::optional<run::influence_table> influences;
            {
                nb::gil_scoped_release release;
                try
                {
                    const run::result_set_reader reader(folder);
                    const std::uintmax_t bound = attention_plasticity::io::physical_memory_bytes() / 4;
                    for (const auto& name : names)
                    {
                        if (!reader.holds(name))
                        {
                            continue;
                        }
                        if (influence_columns && name == io::influence_csv && reader.holds(io::metrics_csv)
                            && reader.holds(io::profile_csv))
                        {
                            const auto table = [&](const char* file) {
                                return io::parsed_table(reader.read(file, bound), reader.display(file));
                            };
                            influences = run::read_influence_table(reader, table(io::metrics_csv),
                                                                   table(io::profile_csv));
                        }
                        else
                        {
                            out.emplace_back(name, reader.read(name, bound));
                        }
                    }
                }
                catch (const run::result_folder_error& e)
                {
                    throw std::invalid_argument("read_results: " + folder + ": " + e.what());
                }
                catch (const attention_plasticity::io::input_error& e)
                {
                    throw std::invalid_argument(std::string("read_results: ") + e.what());
                }
            }
            nb::list result;
            for (auto& [name, text] : out)
            {
                result.append(nb::make_tuple(name, nb::str(text.data(), text.size())));
                std::string().swap(text);
            }
            if (influences)
            {
                run::influence_table& t = *influences;
                nb::str text(t.text.data(), t.text.size());
                std::string().swap(t.text);  // not held twice
                nb::dict columns;
                columns["layer"] = vector_to_numpy(std::move(t.layer));
                columns["q_head"] = vector_to_numpy(std::move(t.q_head));
                columns["k_head"] = vector_to_numpy(std::move(t.k_head));
                columns["document_id"] = vector_to_numpy(std::move(t.document_id));
                columns["quantity"] = vector_to_numpy(std::move(t.quantity));
                columns["q_bucket"] = vector_to_numpy(std::move(t.q_bucket));
                columns["influence"] = vector_to_numpy(std::move(t.influence));
                result.append(nb::make_tuple(std::string(io::influence_csv), text, columns,
                                             run::influence_quantity_names()));
            }
            return result;
        },
        "folder"_a, "names"_a, "influence_columns"_a = false,
        "[(name, text)] of the files `names` of the result set current in `folder` that it holds, read\n"
        "under the folder's lock with the reader of ap_merge and ap_compare (result_set_reader.hpp): FIFOs,\n"
        "devices and folders refused, each file bounded. With influence_columns, the influence table's\n"
        "entry is (name, text, {column: array}, quantity names): read line by line, bounded by the set's\n"
        "heads and documents (run/influence_table.hpp; quantity: int8 indices into the names). Raises\n"
        "InvalidArgumentError naming the file.");
    m.def(
        "_write_result_set",
        [](const std::string& output_dir, const std::vector<std::pair<std::string, std::string>>& files) {
            std::vector<std::string> names;
            std::vector<io::result_file> pieces;
            for (const auto& [name, text] : files)
            {
                names.push_back(name);
                pieces.push_back({name, {std::string_view(text)}});
            }
            nb::gil_scoped_release release;
            run::refuse_foreign_result_set(output_dir, names);
            run::result_set_writer writer(output_dir, names);
            writer.commit(pieces);
        },
        "output_dir"_a, "files"_a,
        "Writes files [(name, text)] into output_dir as one result set, with the writer of ap_analyze\n"
        "(checked and locked folder, all files or none; examples/README.md, 'The result set'): what\n"
        "DumpResult.write does for a result set read back with read_results.");
    m.def(
        "_refuse_result_state_folder",
        [](const std::string& output_dir, const std::string& argument) {
            run::output_folder_words words;
            words.output = argument.c_str();
            run::refuse_result_state_folder<run::output_error>(output_dir, words);
        },
        "output_dir"_a, "argument"_a = "output_dir",
        "Raises OutputError, naming the result folder, when output_dir is or lies inside the state folder\n"
        "(.ap_results) of a result folder: the first refusal of every writer of a result set\n"
        "(include/attention_plasticity/run/output_folder.hpp), for writers of other folders (a capture's\n"
        "dump). `argument`: the name the message gives the folder (e.g. '--out').");
    m.def(
        "set_blas_threads", [](int n) { openblas_set_num_threads(n < 1 ? 1 : n); }, "n"_a,
        "Sets the number of threads of OpenBLAS (Debian's, which the module links) for the calls made from\n"
        "Python. The module starts with one (docs/method.md §7.7), as every front end runs: more threads\n"
        "change the last bits of a GEMM's results. analyze_dump always runs one BLAS thread per worker.");
    m.def("get_blas_threads", [] { return openblas_get_num_threads(); }, "The number of threads of OpenBLAS.");
    m.def(
        "blas_report", [](const std::string& program) { return attention_plasticity::blas_report(program); },
        "program"_a = "attention_plasticity",
        "The line every front end prints before its work (docs/method.md §7.7): 'PROGRAM: BLAS: <OpenBLAS's\n"
        "configuration>; kernels <core> (<who chose them>; CPU: ...), <n> OpenBLAS thread(s)', and with\n"
        "generic kernels on an AVX2 CPU a second line with the exact fix.");
    m.def(
        "blas_kernels",
        [] {
            const attention_plasticity::blas_selection& s = attention_plasticity::select_blas_kernels();
            nb::dict d;
            d["openblas"] = s.openblas;
            d["core"] = s.core;
            d["loaded_core"] = s.loaded_core;
            d["config"] = s.config;
            d["selected"] = s.switched;
            d["from_environment"] = s.user_coretype;
            d["policy_off"] = s.policy_off;
            d["threads"] = s.threads;
            d["generic"] = s.generic;
            return d;
        },
        "The BLAS kernels of this process, as the module's kernel policy left them at import (docs/method.md\n"
        "§7.7): {'openblas', 'core' (in use), 'loaded_core' (OpenBLAS's own choice at load), 'config',\n"
        "'selected' (the policy selected 'core'), 'from_environment' (OPENBLAS_CORETYPE was set),\n"
        "'policy_off' (AP_OPENBLAS_POLICY=off), 'threads', 'generic' (kernels without AVX2 on an AVX2 CPU)}.");
}

void bind_dump_bench(nb::module_& bench)
{
    bench.def("blas_library", &blas_library,
          "The shared library the module's cblas_dgemm resolves to (to check that no other BLAS, e.g. NumPy's\n"
          "or torch's, interposes).");
}
}  // namespace ap_python
