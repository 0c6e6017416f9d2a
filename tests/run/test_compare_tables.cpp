// Unit tests of the comparison's tables (include/attention_plasticity/run/compare_tables.hpp,
// docs/method.md §8.6): the headers their column lists give are the files' headers (written
// out by hand below, as ap_compare has written them), and a row's CSV text has the header's width.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <attention_plasticity/run/compare_tables.hpp>

namespace run = attention_plasticity::run;
namespace io = attention_plasticity::io;

TEST_CASE("compare_tables: the column lists give the headers of the comparison's files", "[compare]")
{
    CHECK(io::header_text(run::compare_heads_columns)
          == "set_a,set_b,layer,q_head,k_head,quantity,q_bucket,value_a,value_b,difference,se,df,z,p,q_bh,p_holm,"
             "significant,design,head_p,head_q,q_within,resolution,reason");
    CHECK(io::header_text(run::compare_changed_columns)
          == "set_a,set_b,layer,q_head,k_head,n_significant,quantities,head_p,head_q,buckets");
    CHECK(io::header_text(run::compare_summary_columns)
          == "set_a,set_b,quantity,layer,n_heads,mean_a,mean_b,mean_difference,se,df,ci_low,ci_high,z,p,sd_difference,"
             "n_significant,resolution,reason");
    CHECK(io::header_text(run::compare_trajectory_columns) == "set,order,quantity,layer,n_heads,mean,se,df,ci_low,ci_high");
}

TEST_CASE("compare_tables: a row's CSV text has the header's width and the writers' number format", "[compare]")
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    run::compare_tables t;
    t.heads.push_back({"A", "B", 1, 2, 0, "ap_bucket", "3", 0.5, 0.25, -0.25, 0.1, 29.5, -2.5, 0.0124, nan, 0.1, 1, "paired",
                       0.03, 0.04, 0.0124, 1e-6, ""});
    t.heads.push_back({"A", "B", 1, 2, 0, "ap_overall", "", 0.5, 0.5, 0, 0.1, inf, nan, nan, nan, nan, 0, "paired", 0.03,
                       0.04, nan, 1e-6, "identical"});
    t.changed.push_back({"A", "B", 1, 2, 0, 1, "", 0.03, 0.04, "3"});
    t.summary.push_back({"A", "B", "ap_overall", "", 1, 0.5, 0.5, 0, 0.1, 59, -0.2, 0.2, nan, nan, nan, 0, 1e-6, "identical"});
    t.trajectory.push_back({"A", 0, "bias_strength", "1", 1, 0.5, nan, nan, nan, nan});
    std::vector<std::string> texts;
    run::for_each_compare_table(t, [&](const char*, const auto& columns, const auto& rows) {
        texts.push_back(io::csv_text(columns, rows));
    });
    REQUIRE(texts.size() == 4);
    CHECK(texts[0].substr(texts[0].find('\n') + 1)
          == "A,B,1,2,0,ap_bucket,3,0.5,0.25,-0.25,0.10000000000000001,29.5,-2.5,0.0124,nan,0.10000000000000001,1,paired,"
             "0.029999999999999999,0.040000000000000001,0.0124,9.9999999999999995e-07,\n"
             "A,B,1,2,0,ap_overall,,0.5,0.5,0,0.10000000000000001,inf,nan,nan,nan,nan,0,paired,0.029999999999999999,"
             "0.040000000000000001,nan,9.9999999999999995e-07,identical\n");
    CHECK(texts[1].substr(texts[1].find('\n') + 1) == "A,B,1,2,0,1,,0.029999999999999999,0.040000000000000001,3\n");
    // The model-level row: layer empty (NA), not "all".
    CHECK(texts[2].substr(texts[2].find('\n') + 1).rfind("A,B,ap_overall,,1,", 0) == 0);
    CHECK(texts[3].substr(texts[3].find('\n') + 1) == "A,0,bias_strength,1,1,0.5,nan,nan,nan,nan\n");
    for (const std::string& text : texts)
    {
        // Every line has as many fields as the header.
        std::size_t start = 0, width = 0;
        while (start < text.size())
        {
            const std::size_t end = text.find('\n', start);
            const std::size_t fields = 1 + static_cast<std::size_t>(std::count(text.begin() + start, text.begin() + end, ','));
            if (start == 0)
            {
                width = fields;
            }
            CHECK(fields == width);
            start = end + 1;
        }
    }
}
