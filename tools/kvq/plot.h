// PNG plots of benchmark sweeps (ops/s against clients), drawn by gnuplot (Debian's gnuplot-nox,
// installed by scripts/install-deps.sh).
#ifndef KVQ_TOOLS_KVQ_PLOT_H_
#define KVQ_TOOLS_KVQ_PLOT_H_

#include <string>
#include <utility>
#include <vector>

namespace kvq::cli {

// One line of a panel: (x, y) points in the order drawn.
struct PlotLine {
  std::string title;
  std::vector<std::pair<double, double>> points;
};

// One panel of the figure: its title and lines, drawn with logarithmic axes (x base 2).
struct PlotPanel {
  std::string title;
  std::vector<PlotLine> lines;
};

// Draws `panels` side by side into the PNG file `path` (x: `x_label`, y: `y_label`); panels
// without lines are left out, and none with lines throws CliError(kExitError). Throws
// CliError(kExitError) naming the cause if gnuplot is missing or fails; `path` is then not written
// (or left as gnuplot left it).
void plot_png(const std::string& path, const std::vector<PlotPanel>& panels,
              const std::string& x_label, const std::string& y_label);

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_PLOT_H_
