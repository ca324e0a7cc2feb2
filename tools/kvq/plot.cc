#include "tools/kvq/plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tools/kvq/cli.h"

namespace kvq::cli {
namespace {

// A gnuplot single-quoted string: '' stands for one quote; nothing else is special.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The data of every line as gnuplot data blocks ($d0, $d1, ...), in panel order.
void write_data_blocks(std::ostream& script, const std::vector<PlotPanel>& panels) {
  int block = 0;
  for (const PlotPanel& panel : panels) {
    for (const PlotLine& line : panel.lines) {
      script << "$d" << block++ << " << EOD\n";
      for (const auto& [x, y] : line.points) script << x << " " << y << "\n";
      script << "EOD\n";
    }
  }
}

std::string gnuplot_script(const std::string& path, const std::vector<PlotPanel>& panels,
                           const std::string& x_label, const std::string& y_label) {
  std::ostringstream script;
  write_data_blocks(script, panels);
  script << "set terminal png size " << 600 * panels.size() << ",600\n"
         << "set output " << quoted(path) << "\n"
         << "set multiplot layout 1," << panels.size() << "\n"
         << "set logscale y\nset logscale x 2\nset xlabel " << quoted(x_label) << "\nset ylabel "
         << quoted(y_label) << "\nset key outside bottom center horizontal font ',8'\n";
  int block = 0;
  for (const PlotPanel& panel : panels) {
    script << "set title " << quoted(panel.title) << "\nplot ";
    for (std::size_t i = 0; i < panel.lines.size(); ++i) {
      script << (i ? ", " : "") << "$d" << block++ << " with linespoints title "
             << quoted(panel.lines[i].title);
    }
    script << "\n";
  }
  script << "unset multiplot\n";
  return script.str();
}

// Runs `gnuplot FILE` with the script in a temporary file; its stderr is gnuplot's complaint.
void run_gnuplot(const std::string& script) {
  char script_path[] = "/tmp/kvq-plot.XXXXXX";
  const int fd = mkstemp(script_path);
  if (fd < 0) throw CliError(kExitError, "cannot create a temporary file for gnuplot");
  close(fd);
  std::ofstream(script_path) << script;
  const std::string command = std::string("gnuplot ") + script_path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[512];
  while (pipe && std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pipe ? pclose(pipe) : -1;
  std::remove(script_path);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const bool missing = WIFEXITED(status) && WEXITSTATUS(status) == 127;
    throw CliError(kExitError, missing ? "--plot needs gnuplot (apt install gnuplot-nox)"
                                       : "gnuplot failed: " + output);
  }
}

}  // namespace

void plot_png(const std::string& path, const std::vector<PlotPanel>& panels,
              const std::string& x_label, const std::string& y_label) {
  std::vector<PlotPanel> drawn;
  std::copy_if(panels.begin(), panels.end(), std::back_inserter(drawn),
               [](const PlotPanel& p) { return !p.lines.empty(); });
  if (drawn.empty()) throw CliError(kExitError, "--plot: no measurements to draw");
  run_gnuplot(gnuplot_script(path, drawn, x_label, y_label));
}

}  // namespace kvq::cli
