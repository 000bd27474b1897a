#include "app/common/help.h"

#include <regex>
#include <sstream>

#include "app/common/context_parallel_options.h"
#include "app/common/options.h"

namespace mpitron::app {

namespace {

// Lines of help text are kept within this many columns.
constexpr std::size_t kHelpWidth = 100;

// `text` with its spaces turned into line breaks where a line would pass `width` columns.
std::string wrapped(const std::string& text, std::size_t width) {
  std::string out;
  std::size_t line_start = 0, last_space = std::string::npos;
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n') {
      line_start = out.size();
      last_space = std::string::npos;
    } else if (text[i] == ' ') {
      last_space = out.size() - 1;
    }
    if (out.size() - line_start >= width && last_space != std::string::npos) {
      out[last_space] = '\n';
      line_start = last_space + 1;
      last_space = std::string::npos;
    }
  }
  return out;
}

class HelpFormatter : public CLI::Formatter {
 public:
  // Room for the longest flag with its type ("--exit-duration-in-mins FLOAT") beside its text.
  HelpFormatter() { column_width(32); }

  // CLI11 separates some groups by one newline and others by two: every part of the help is
  // separated from the next by exactly one blank line.
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    std::string text = CLI::Formatter::make_help(app, std::move(name), mode);
    text = std::regex_replace(text, std::regex("\n{3,}"), "\n\n");
    // The list of common flags (the first group: --help is in it) follows the usage line at
    // once, a synopsis, so that train's help fits one screen.
    const std::string common = "\n\n" + std::string(kCommonGroup);
    if (const std::size_t at = text.find(common); at != std::string::npos) text.erase(at, 1);
    return std::regex_replace(text, std::regex("([^\n])\nExample:"), "$1\n\nExample:");
  }
  std::string make_option_desc(const CLI::Option* option) const override {
    return wrapped(CLI::Formatter::make_option_desc(option), kHelpWidth - get_column_width());
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_name(),
                             wrapped(sub->get_description(), kHelpWidth - get_column_width()),
                             get_column_width());
    return out.str();
  }
  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> options) const override {
    if (group != kCommonGroup) return CLI::Formatter::make_group(group, is_positional, options);
    // The names only, after the heading and on as few lines as fit.
    std::string text;
    std::string line = group + ":";
    for (const CLI::Option* option : options) {
      const std::string name = " " + option->get_name();
      if (line.size() + name.size() > kHelpWidth) {
        text += line + "\n";
        line = " ";
      }
      line += name;
    }
    return text + line + "\n";
  }
};

}  // namespace

std::shared_ptr<CLI::Formatter> help_formatter() {
  return std::make_shared<HelpFormatter>();
}

std::string common_flags_help() {
  CLI::App scratch;
  CommonOptions unused;
  add_common_options(scratch, unused);
  add_context_parallel_options(scratch, unused);
  // --help is listed with the top level's own options already.
  const CLI::Option* help = scratch.get_help_ptr();
  const std::vector<CLI::Option*> common = scratch.get_options([help](const CLI::Option* option) {
    return option->get_group() == kCommonGroup && option != help;
  });
  return HelpFormatter().make_group("Common flags (each subcommand's --help lists those it takes)",
                                    false, {common.begin(), common.end()});
}

void add_example(CLI::App& command, const std::string& example) {
  command.footer("Example:\n  " + example);
}

}  // namespace mpitron::app
