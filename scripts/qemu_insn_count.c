/* A qemu-user plugin that counts the guest instructions a program executes and prints the total to
 * stderr at exit ("instructions N"): scripts/cross_kernel.py counts the aarch64 fusion kernel's work with
 * it (no timing is meaningful under emulation; the count is, and it is the same on every run).
 *
 * Debian's qemu-user (7.2) can load plugins but ships neither plugins nor qemu-plugin.h, so the few
 * declarations used are written here, as QEMU's plugin API (plugin version 1) defines them.
 *
 *     gcc -shared -fPIC -O2 -o libinsn.so scripts/qemu_insn_count.c
 *     qemu-aarch64 -plugin ./libinsn.so PROGRAM ARGS...
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *), void *userdata);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

static uint64_t executed;   /* qemu-user runs the kernel driver's one thread: a plain counter is exact */

/* Each translated block adds its instruction count to the counter every time it runs (inline, no call). */
static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed, qemu_plugin_tb_n_insns(tb));
}

static void on_exit(qemu_plugin_id_t id, void *userdata) {
    (void)id, (void)userdata;
    fprintf(stderr, "instructions %llu\n", (unsigned long long)executed);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info, (void)argc, (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit, NULL);
    return 0;
}
