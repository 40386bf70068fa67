/* commands.h - the subcommands of `pooled`, one file each (cmd_<name>.c).
 * Each gets argv after the subcommand name (argv[0] is the subcommand) and returns the
 * process exit status. On failure it prints exactly one line to stderr. */
#ifndef PL_CMD_COMMANDS_H
#define PL_CMD_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_room(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
