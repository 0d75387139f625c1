// The comparison plot: latency (log axis) by percentile on a "nines" axis beside calls/s over
// time. Plain SVG 1.1 with generic font families so it renders the same in a browser, an image
// viewer or a pull-request comment, with nothing fetched and nothing executed. The same grid,
// curves and legends draw the HTML report's errors/s panel (render_time_svg).
//
// Layout is computed, not hoped for: every text's box is estimated from its length and font
// size (average glyph width 0.62 em for sans-serif), tick labels are thinned until they fit
// their spacing, and each legend sits inside its frame in the corner the curves cross least.

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "report.hpp"
#include "report_internal.hpp"

namespace ringrpc::load {

using report_detail::strprintf;
using report_detail::xml_escape;

namespace {

constexpr double width = 1000;
constexpr double height = 470;
constexpr double plot_top = 78;
constexpr double plot_bottom = 400;
constexpr double left_lo = 80, left_hi = 460;     // latency panel
constexpr double right_lo = 590, right_hi = 970;  // rate panel
constexpr double font = 12;
constexpr double glyph_em = 0.62;  // shared with the layout test (tests/load/plot_properties.py)
constexpr double legend_row = 16;

// Distinct on white and for the common colour-vision deficiencies (a qualitative palette).
constexpr const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

// Characters as a reader sees them: UTF-8 continuation bytes do not count.
double text_width(const std::string& s, double size = font) {
  double n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) == 0x80 ? 0 : 1;
  return n * size * glyph_em;
}

// Long URLs must not run out of the picture.
std::string fit(const std::string& s, double max_px, double size) {
  if (text_width(s, size) <= max_px) return s;
  std::string out;
  for (const unsigned char c : s) {
    if ((c & 0xC0) != 0x80 && text_width(out + "...", size) + size * glyph_em > max_px) break;
    out += static_cast<char>(c);
  }
  return out + "...";
}

// x of a percentile on the nines axis: 0% -> 0, 90% -> 1, 99% -> 2, ...
double nines(double percentile) { return std::log10(100 / (100 - percentile)); }

std::string nines_label(int k) {
  if (k == 0) return "0%";
  if (k == 1) return "90%";
  if (k == 2) return "99%";
  return "99." + std::string(static_cast<std::size_t>(k - 2), '9') + "%";
}

std::string latency_label(double us) {
  if (us >= 1e6) return strprintf("%g s", us / 1e6);
  if (us >= 1e3) return strprintf("%g ms", us / 1e3);
  return strprintf("%g \xC2\xB5s", us);
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

double nice_top(double max, double& step) {
  step = nice_step(max);
  return std::max(step, std::ceil(max / step - 1e-9) * step);
}

std::string count_label(double v, double step) {
  if (v == 0) return "0";
  if (step >= 1e6) return strprintf("%gM", v / 1e6);
  if (step >= 1e3) return strprintf("%gk", v / 1e3);
  if (step >= 1) return strprintf("%.0f", v);
  const int decimals = static_cast<int>(std::ceil(-std::log10(step)));
  return strprintf("%.*f", decimals, v);
}

struct linear_axis {
  double lo, hi, px_lo, px_hi;
  double map(double v) const { return px_lo + (v - lo) / (hi - lo) * (px_hi - px_lo); }
};

// Latency: one decade per step, from a power of ten below the fastest call to one above the
// slowest, so that p50 and p99.99 are both readable.
struct log_axis {
  double lo_exp, hi_exp, px_lo, px_hi;
  double map(double us) const {
    const double e = std::log10(std::max(us, std::pow(10, lo_exp)));
    return px_lo + (e - lo_exp) / (hi_exp - lo_exp) * (px_hi - px_lo);
  }
};

void text(std::string& svg, const char* cls, double x, double y, const char* anchor, const std::string& t,
          double size = font, const char* extra = "") {
  svg += strprintf("<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%g\"%s>%s</text>\n", cls, x,
                   y, anchor, size, extra, xml_escape(t).c_str());
}

void grid_line(std::string& svg, double x1, double y1, double x2, double y2) {
  svg += strprintf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", x1, y1, x2, y2);
}

void frame(std::string& svg, double lo, double hi, const std::string& title, const std::string& x_title,
           const std::string& y_title, double y_title_x) {
  const double mid_x = (lo + hi) / 2;
  const double mid_y = (plot_top + plot_bottom) / 2;
  text(svg, "panel-title", mid_x, plot_top - 8, "middle", title, 13, " font-weight=\"bold\"");
  text(svg, "axis-title", mid_x, plot_bottom + 38, "middle", x_title);
  svg += strprintf("<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%g\" "
                   "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
                   y_title_x, mid_y, font, y_title_x, mid_y, xml_escape(y_title).c_str());
  svg += strprintf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", lo,
                   plot_top, hi - lo, plot_bottom - plot_top);
}

void polyline(std::string& svg, const std::vector<std::pair<double, double>>& pts, const char* colour,
              const std::string& label, bool dashed) {
  if (pts.empty()) return;
  std::string points;
  for (const auto& [x, y] : pts) points += strprintf("%.1f,%.1f ", x, y);
  points.pop_back();
  svg += strprintf("<polyline class=\"series\" data-label=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s "
                   "stroke-linejoin=\"round\" points=\"%s\"><title>%s</title></polyline>\n",
                   xml_escape(label).c_str(), colour, dashed ? " stroke-dasharray=\"6 3\"" : "", points.c_str(),
                   xml_escape(label).c_str());
}

struct legend_entry {
  std::string label;
  const char* colour;
  bool dashed;
};

using points = std::vector<std::pair<double, double>>;

// A legend box inside the frame [lo, hi] x [plot_top, plot_bottom], in whichever corner covers
// the fewest points of the curves drawn there.
void legend(std::string& svg, const std::vector<legend_entry>& entries, double lo, double hi, const points& drawn) {
  if (entries.empty()) return;
  const double max_w = hi - lo - 24;
  double w = 0;
  for (const auto& e : entries) w = std::min(max_w, std::max(w, 34 + text_width(e.label)));
  const double h = static_cast<double>(entries.size()) * legend_row + 8;
  double x = lo + 8, top = plot_top + 8;
  std::size_t best = static_cast<std::size_t>(-1);
  for (const double cx : {lo + 8, hi - 16 - w}) {
    for (const double cy : {plot_top + 8, plot_bottom - 8 - h}) {
      const auto covered = static_cast<std::size_t>(std::count_if(drawn.begin(), drawn.end(), [&](const auto& p) {
        return p.first >= cx && p.first <= cx + w + 8 && p.second >= cy && p.second <= cy + h;
      }));
      if (covered < best) {
        best = covered;
        x = cx;
        top = cy;
      }
    }
  }
  svg += strprintf("<rect class=\"legend-box\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" "
                   "fill-opacity=\"0.85\" stroke=\"#bbb\"/>\n",
                   x, top, w + 8, h);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const double row_y = top + 4 + static_cast<double>(i + 1) * legend_row - 4;
    svg += strprintf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"%s/>\n", x + 6,
                     row_y - 4, x + 30, row_y - 4, entries[i].colour,
                     entries[i].dashed ? " stroke-dasharray=\"6 3\"" : "");
    text(svg, "legend", x + 36, row_y, "start", fit(entries[i].label, max_w - 34, font));
  }
}

}  // namespace

namespace {

// The data's extent over every series, so that all share the same axes.
struct data_ranges {
  double max_nines = 0, min_latency = 0, max_latency = 0, max_t = 0, max_rate = 0;
  bool any_latency = false;

  void take_latency(const std::vector<std::pair<double, double>>& spectrum) {
    for (const auto& [p, us] : spectrum) {
      if (p < 100) max_nines = std::max(max_nines, nines(p));
      if (us <= 0) continue;
      min_latency = any_latency ? std::min(min_latency, us) : us;
      max_latency = std::max(max_latency, us);
      any_latency = true;
    }
  }

  explicit data_ranges(const std::vector<plot_series>& series) {
    for (const plot_series& s : series) {
      take_latency(s.spectrum);
      take_latency(s.service_spectrum);
      for (const auto& [t, rate] : s.rate) {
        max_t = std::max(max_t, t);
        max_rate = std::max(max_rate, rate);
      }
      max_rate = std::max(max_rate, s.requested_rate);
      for (const auto& [from, to, rate, rate_end] : s.requested_steps) {
        max_t = std::max(max_t, to);
        max_rate = std::max({max_rate, rate, rate_end});
      }
    }
  }
};

// The two panels' axes, from the data's extent.
struct plot_axes {
  int nines_top;
  double lo_exp, hi_exp;
  double time_step = 1, rate_step = 1;
  double time_top, rate_top;
  log_axis lat_y;
  linear_axis nines_x, time_x, rate_y;

  explicit plot_axes(const data_ranges& d)
      // Always show up to 99.999%, as HdrHistogram's plotter does, and further if the data resolve it.
      : nines_top(std::max(5, static_cast<int>(std::ceil(d.max_nines - 1e-9)))),
        lo_exp(d.any_latency ? std::floor(std::log10(d.min_latency)) : 0),
        hi_exp(std::max(d.any_latency ? std::ceil(std::log10(d.max_latency)) : 3, lo_exp + 1)),
        time_top(nice_top(d.max_t, time_step)),
        rate_top(nice_top(d.max_rate * 1.05, rate_step)),  // room above a flat rate for the curve
        lat_y{lo_exp, hi_exp, plot_bottom, plot_top},
        nines_x{0, static_cast<double>(nines_top), left_lo, left_hi},
        time_x{0, time_top, right_lo, right_hi},
        rate_y{0, rate_top, plot_bottom, plot_top} {}
};

// The run's configuration; several runs: each in its legend, the title says how many.
void draw_title(std::string& svg, const std::vector<plot_series>& series) {
  std::string title = series.empty() ? std::string("no runs") : series.front().title;
  for (const plot_series& s : series) {
    if (s.title != title) title = strprintf("%zu runs compared", series.size());
  }
  if (title.empty()) title = "ringrpc-load";
  text(svg, "title", width / 2, 26, "middle", fit(title, width - 40, 15), 15, " font-weight=\"bold\"");
}

// Log y with a label per decade (and 2, 5 within a decade when the range is one decade), nines x
// thinned until the labels fit their spacing.
void draw_latency_grid(std::string& svg, const plot_axes& ax) {
  for (double e = ax.lo_exp; e <= ax.hi_exp + 1e-9; ++e) {
    std::vector<double> marks{1};
    if (ax.hi_exp - ax.lo_exp <= 1) marks = {1, 2, 5};
    for (const double m : marks) {
      const double us = m * std::pow(10, e);
      if (std::log10(us) > ax.hi_exp + 1e-9) break;
      const double y = ax.lat_y.map(us);
      grid_line(svg, left_lo, y, left_hi, y);
      text(svg, "tick latency-tick", left_lo - 6, y + 4, "end", latency_label(us), font,
           strprintf(" data-value=\"%g\"", us).c_str());
    }
  }
  const double px_per_nine = (left_hi - left_lo) / ax.nines_top;
  int stride = 1;
  while (text_width(nines_label(ax.nines_top)) + 8 > px_per_nine * stride) ++stride;
  for (int k = 0; k <= ax.nines_top; ++k) {
    const double x = ax.nines_x.map(k);
    grid_line(svg, x, plot_top, x, plot_bottom);
    if (k % stride == 0) text(svg, "tick nines-tick", x, plot_bottom + 16, "middle", nines_label(k));
  }
  frame(svg, left_lo, left_hi, "latency by percentile", "percentile", "latency (log scale)", left_lo - 62);
}

// A value over time: linear y from 0 with 1-2-5 ticks, seconds on x thinned until the labels
// fit. The calls/s panel of the plot and the HTML report's errors/s panel share it.
struct time_grid {
  linear_axis time_x, value_y;
  double time_top, time_step, value_top, value_step;
};

void draw_time_grid(std::string& svg, const time_grid& g, const std::string& title, const std::string& y_title) {
  const double lo = g.time_x.px_lo, hi = g.time_x.px_hi;
  for (int i = 0;; ++i) {
    const double v = i * g.value_step;
    if (v > g.value_top * (1 + 1e-9)) break;
    const double y = g.value_y.map(v);
    grid_line(svg, lo, y, hi, y);
    text(svg, "tick rate-tick", lo - 6, y + 4, "end", count_label(v, g.value_step));
  }
  int time_stride = 1;
  const double px_per_step = (hi - lo) / (g.time_top / g.time_step);
  while (text_width(count_label(g.time_top, g.time_step)) + 8 > px_per_step * time_stride) ++time_stride;
  for (int i = 0;; ++i) {
    const double t = i * g.time_step;
    if (t > g.time_top * (1 + 1e-9)) break;
    const double x = g.time_x.map(t);
    grid_line(svg, x, plot_top, x, plot_bottom);
    if (i % time_stride == 0) text(svg, "tick time-tick", x, plot_bottom + 16, "middle", count_label(t, g.time_step));
  }
  frame(svg, lo, hi, title, "time (s)", y_title, lo - 56);
}

void draw_rate_grid(std::string& svg, const plot_axes& ax) {
  draw_time_grid(svg, {ax.time_x, ax.rate_y, ax.time_top, ax.time_step, ax.rate_top, ax.rate_step},
                 "calls/s over time", "calls/s");
}

// What each panel's legend lists, and the points drawn there (the legend avoids them).
struct panel {
  std::vector<legend_entry> legend;
  points drawn;
};

// One series' latency spectrum (corrected, and service time in an open loop).
void draw_latency_curves(std::string& svg, const plot_series& s, const char* colour, const plot_axes& ax, panel& p) {
  auto spectrum_points = [&](const std::vector<std::pair<double, double>>& spectrum) {
    std::vector<std::pair<double, double>> pts;
    double last_x = 0;
    for (const auto& [pct, us] : spectrum) {
      // 100% is infinitely many nines; draw the maximum where the data's resolution ends, a
      // vertical step up from the last resolvable percentile.
      const double x = pct < 100 ? std::min(nines(pct), double(ax.nines_top)) : last_x;
      last_x = x;
      pts.emplace_back(ax.nines_x.map(x), ax.lat_y.map(us));
    }
    return pts;
  };
  const bool open = !s.service_spectrum.empty() || s.requested_rate > 0;
  const std::string corrected = open ? s.label + " (corrected)" : s.label;
  const points corrected_pts = spectrum_points(s.spectrum);
  p.drawn.insert(p.drawn.end(), corrected_pts.begin(), corrected_pts.end());
  polyline(svg, corrected_pts, colour, corrected, false);
  p.legend.push_back({corrected, colour, false});
  if (s.service_spectrum.empty()) return;
  const std::string service = s.label + " (service)";
  const points service_pts = spectrum_points(s.service_spectrum);
  p.drawn.insert(p.drawn.end(), service_pts.begin(), service_pts.end());
  polyline(svg, service_pts, colour, service, true);
  p.legend.push_back({service, colour, true});
}

// The rate asked for, dashed: each step's rate over its own time (a --rate-ramp segment's a
// slanted line) with a vertical jump between steps, or one flat line.
void draw_requested_rate(std::string& svg, const plot_series& s, const char* colour, const plot_axes& ax, panel& p) {
  if (!s.requested_steps.empty()) {
    std::vector<std::pair<double, double>> req;
    for (const auto& [from, to, rate, rate_end] : s.requested_steps) {
      req.emplace_back(ax.time_x.map(from), ax.rate_y.map(rate));
      req.emplace_back(ax.time_x.map(to), ax.rate_y.map(rate_end));  // slanted for a ramp
    }
    const std::string requested =
        s.label + " requested " +
        (s.requested_steps.size() != 1                                            ? std::string("(steps)")
         : std::get<2>(s.requested_steps.front()) != std::get<3>(s.requested_steps.front()) ? std::string("(ramp)")
                                                   : count_label(std::get<2>(s.requested_steps.front()), 1000) + "/s");
    polyline(svg, req, colour, requested, true);
    for (std::size_t k = 0; k + 1 < req.size(); ++k) {
      const double x0 = req[k].first, x1 = req[k + 1].first, y0 = req[k].second, y1 = req[k + 1].second;
      const int n = std::max(1, static_cast<int>(std::hypot(x1 - x0, y1 - y0) / 4));
      for (int m = 0; m <= n; ++m) p.drawn.emplace_back(x0 + (x1 - x0) * m / n, y0 + (y1 - y0) * m / n);
    }
    p.legend.push_back({requested, colour, true});
  } else if (s.requested_rate > 0) {
    const std::string requested = s.label + " requested " + count_label(s.requested_rate, 1000) + "/s";
    const double y = ax.rate_y.map(s.requested_rate);
    polyline(svg, {{right_lo, y}, {right_hi, y}}, colour, requested, true);
    for (double x = right_lo; x <= right_hi; x += 4) p.drawn.emplace_back(x, y);
    p.legend.push_back({requested, colour, true});
  }
}

// One series' calls/s over time, with a hollow mark on a last bucket cut short.
void draw_rate_curves(std::string& svg, const plot_series& s, const char* colour, const plot_axes& ax, panel& p) {
  std::vector<std::pair<double, double>> pts;
  for (const auto& [t, rate] : s.rate) pts.emplace_back(ax.time_x.map(t), ax.rate_y.map(rate));
  p.drawn.insert(p.drawn.end(), pts.begin(), pts.end());
  polyline(svg, pts, colour, s.label, false);
  p.legend.push_back({s.label, colour, false});
  if (s.last_rate_partial && !pts.empty()) {
    // An interrupted run: its last rate is over its own width, and the mark says it is not a
    // whole second.
    svg += strprintf("<circle class=\"partial\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"white\" stroke=\"%s\" "
                     "stroke-width=\"1.5\"><title>last bucket: part of a second</title></circle>\n",
                     pts.back().first, pts.back().second, colour);
  }
  draw_requested_rate(svg, s, colour, ax, p);
}

// The root element and a white background (an image viewer's default may be black).
std::string svg_open(double w) {
  std::string svg = strprintf("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
                              "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
                              "font-size=\"%g\">\n",
                              w, height, w, height, font);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  return svg;
}

}  // namespace

std::string render_svg(const std::vector<plot_series>& series) {
  const plot_axes ax{data_ranges(series)};
  std::string svg = svg_open(width);
  draw_title(svg, series);
  draw_latency_grid(svg, ax);
  draw_rate_grid(svg, ax);
  panel latency, rate;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* colour = palette[i % std::size(palette)];
    draw_latency_curves(svg, series[i], colour, ax, latency);
    draw_rate_curves(svg, series[i], colour, ax, rate);
  }
  legend(svg, latency.legend, left_lo, left_hi, latency.drawn);
  legend(svg, rate.legend, right_lo, right_hi, rate.drawn);
  svg += "</svg>\n";
  return svg;
}

std::string render_time_svg(const std::string& title, const std::string& y_title,
                            const std::vector<time_series>& series) {
  constexpr double panel_width = 500, lo = 80, hi = 470;
  double max_t = 0, max_v = 0;
  for (const time_series& s : series) {
    for (const auto& [t, v] : s.points) {
      max_t = std::max(max_t, t);
      max_v = std::max(max_v, v);
    }
  }
  time_grid g{};
  g.time_top = nice_top(max_t, g.time_step);
  g.value_top = nice_top(max_v * 1.05, g.value_step);
  g.time_x = {0, g.time_top, lo, hi};
  g.value_y = {0, g.value_top, plot_bottom, plot_top};
  std::string svg = svg_open(panel_width);
  draw_time_grid(svg, g, title, y_title);
  panel p;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* colour = palette[i % std::size(palette)];
    points pts;
    for (const auto& [t, v] : series[i].points) pts.emplace_back(g.time_x.map(t), g.value_y.map(v));
    p.drawn.insert(p.drawn.end(), pts.begin(), pts.end());
    polyline(svg, pts, colour, series[i].label, false);
    p.legend.push_back({series[i].label, colour, false});
  }
  legend(svg, p.legend, lo, hi, p.drawn);
  svg += "</svg>\n";
  return svg;
}

}  // namespace ringrpc::load
