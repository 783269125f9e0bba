#include "cli/commands.h"

int main(int argc, char** argv) { return pagoda::cli_main(argc, argv); }
