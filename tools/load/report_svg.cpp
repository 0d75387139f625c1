// The comparison plot: latency by percentile on a "nines" axis beside calls/s over time.
// Plain SVG 1.1 with generic font families so it renders the same in a browser, an image viewer
// or a pull-request comment, with nothing fetched and nothing executed.

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "report.hpp"
#include "report_internal.hpp"

namespace ringrpc::load {

using report_detail::strprintf;

namespace {

constexpr double width = 1000;
constexpr double panel_width = width / 2;
constexpr double plot_top = 50;
constexpr double plot_bottom = 370;
constexpr double margin_left = 75;   // room for y tick labels
constexpr double margin_right = 30;  // room for the last x tick label
constexpr double legend_top = 420;
constexpr double legend_row = 20;
constexpr int legend_columns = 3;
constexpr double legend_column_width = (width - 2 * 20) / legend_columns;

// Distinct on white and for the common colour-vision deficiencies (a qualitative palette).
constexpr const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and line breaks are not allowed in XML 1.0 at all.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

// x of a percentile on the nines axis: 0% -> 0, 90% -> 1, 99% -> 2, ...
double nines(double percentile) { return std::log10(100 / (100 - percentile)); }

std::string nines_label(int k) {
  if (k == 0) return "0%";
  if (k == 1) return "90%";
  if (k == 2) return "99%";
  return "99." + std::string(static_cast<std::size_t>(k - 2), '9') + "%";
}

// A 1-2-5 step giving about `target` intervals up to `max`.
double nice_step(double max, int target = 5) {
  if (!(max > 0)) return 1;
  const double raw = max / target;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
  return nice * magnitude;
}

std::string tick_label(double v, double step) {
  if (v == 0) return "0";
  if (step >= 1e6) return strprintf("%gM", v / 1e6);
  if (step >= 1e3) return strprintf("%gk", v / 1e3);
  if (step >= 1) return strprintf("%.0f", v);
  const int decimals = static_cast<int>(std::ceil(-std::log10(step)));
  return strprintf("%.*f", decimals, v);
}

struct axis {
  double lo = 0, hi = 1;  // data range
  double px_lo = 0, px_hi = 1;
  double map(double v) const { return px_lo + (v - lo) / (hi - lo) * (px_hi - px_lo); }
};

struct panel {
  axis x, y;
};

panel make_panel(int index, double x_hi, double y_hi) {
  panel p;
  const double left = index * panel_width + margin_left;
  p.x = axis{0, x_hi > 0 ? x_hi : 1, left, (index + 1) * panel_width - margin_right};
  p.y = axis{0, y_hi > 0 ? y_hi : 1, plot_bottom, plot_top};
  return p;
}

void frame(std::string& svg, const panel& p, const std::string& title, const std::string& x_title,
           const std::string& y_title) {
  const double mid_x = (p.x.px_lo + p.x.px_hi) / 2;
  svg += strprintf("<text x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
                   mid_x, xml_escape(title).c_str());
  svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", mid_x, plot_bottom + 38,
                   xml_escape(x_title).c_str());
  const double mid_y = (plot_top + plot_bottom) / 2;
  const double y_title_x = p.x.px_lo - margin_left + 14;
  svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
                   y_title_x, mid_y, y_title_x, mid_y, xml_escape(y_title).c_str());
  svg += strprintf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
                   p.x.px_lo, plot_top, p.x.px_hi - p.x.px_lo, plot_bottom - plot_top);
}

void x_tick(std::string& svg, const panel& p, double v, const std::string& label) {
  const double x = p.x.map(v);
  svg += strprintf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, plot_top, x,
                   plot_bottom);
  svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, plot_bottom + 16,
                   xml_escape(label).c_str());
}

void y_ticks(std::string& svg, const panel& p, double step) {
  for (int i = 0;; ++i) {
    const double v = i * step;
    if (v > p.y.hi * (1 + 1e-9)) break;
    const double y = p.y.map(v);
    svg += strprintf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", p.x.px_lo, y,
                     p.x.px_hi, y);
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", p.x.px_lo - 6, y + 4,
                     tick_label(v, step).c_str());
  }
}

void polyline(std::string& svg, const std::vector<std::pair<double, double>>& pts, const char* colour,
              const std::string& label) {
  if (pts.empty()) return;
  std::string points;
  for (const auto& [x, y] : pts) points += strprintf("%.1f,%.1f ", x, y);
  points.pop_back();
  svg += strprintf("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" stroke-linejoin=\"round\" points=\"%s\">"
                   "<title>%s</title></polyline>\n",
                   colour, points.c_str(), xml_escape(label).c_str());
}

// Rounds `max` up to a whole number of nice steps.
double nice_top(double max, double& step) {
  step = nice_step(max);
  return std::max(step, std::ceil(max / step - 1e-9) * step);
}

}  // namespace

std::string render_svg(const std::vector<plot_series>& series) {
  // Data ranges over every series, so that all share the same axes.
  double max_nines = 0, max_latency = 0, max_t = 0, max_rate = 0;
  for (const plot_series& s : series) {
    for (const auto& [p, us] : s.spectrum) {
      if (p < 100) max_nines = std::max(max_nines, nines(p));
      max_latency = std::max(max_latency, us);
    }
    for (const auto& [t, rate] : s.rate) {
      max_t = std::max(max_t, t);
      max_rate = std::max(max_rate, rate);
    }
  }
  // Always show up to 99.999%, as HdrHistogram's plotter does, and further if the data resolve it.
  const int nines_top = std::max(5, static_cast<int>(std::ceil(max_nines - 1e-9)));
  double latency_step = 1, time_step = 1, rate_tick = 1;
  const double latency_top = nice_top(max_latency, latency_step);
  const double time_top = nice_top(max_t, time_step);
  const double rate_top = nice_top(max_rate, rate_tick);

  const int legend_rows = static_cast<int>((series.size() + legend_columns - 1) / legend_columns);
  const double height = legend_top + legend_rows * legend_row + 10;

  std::string svg;
  svg += strprintf("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
                   "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
                   width, height, width, height);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";

  // Left: latency by percentile.
  const panel left = make_panel(0, nines_top, latency_top);
  for (int k = 0; k <= nines_top; ++k) x_tick(svg, left, k, nines_label(k));
  y_ticks(svg, left, latency_step);
  frame(svg, left, "latency by percentile", "percentile", "latency (\xC2\xB5s)");

  // Right: calls/s over time.
  const panel right = make_panel(1, time_top, rate_top);
  for (int i = 0;; ++i) {
    const double t = i * time_step;
    if (t > time_top * (1 + 1e-9)) break;
    x_tick(svg, right, t, tick_label(t, time_step));
  }
  y_ticks(svg, right, rate_tick);
  frame(svg, right, "calls/s over time", "time (s)", "calls/s");

  for (std::size_t i = 0; i < series.size(); ++i) {
    const plot_series& s = series[i];
    const char* colour = palette[i % std::size(palette)];

    std::vector<std::pair<double, double>> pts;
    double last_x = 0;
    for (const auto& [p, us] : s.spectrum) {
      // 100% is infinitely many nines; draw the maximum where the data's resolution ends, a
      // vertical step up from the last resolvable percentile.
      const double x = p < 100 ? std::min(nines(p), double(nines_top)) : last_x;
      last_x = x;
      pts.emplace_back(left.x.map(x), left.y.map(us));
    }
    polyline(svg, pts, colour, s.label);

    pts.clear();
    for (const auto& [t, rate] : s.rate) pts.emplace_back(right.x.map(t), right.y.map(rate));
    polyline(svg, pts, colour, s.label);

    const double lx = 20 + static_cast<double>(i % legend_columns) * legend_column_width;
    const double ly = legend_top + static_cast<double>(i / legend_columns) * legend_row;
    svg += strprintf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n", lx,
                     ly - 4, lx + 24, ly - 4, colour);
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 30, ly, xml_escape(s.label).c_str());
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace ringrpc::load
