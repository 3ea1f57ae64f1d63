//! More test threads than cores, for a test binary whose tests mostly wait (on sockets,
//! child processes, timers, or a few long searches at the end of the list).
//!
//! libtest runs as many tests at once as the machine has cores unless `RUST_TEST_THREADS`
//! or `--test-threads` says otherwise. A binary that includes this file sets
//! `RUST_TEST_THREADS` to `TEST_THREADS_PER_CORE` (a `usize` constant the including crate
//! declares at its root) times the cores before `main` runs (an `.init_array` entry on
//! Linux, where the fast tier is measured; elsewhere it does nothing), unless the variable
//! is set; libtest reads it only without `--test-threads`. So `cargo test --
//! --test-threads=1` and `RUST_TEST_THREADS=1 cargo test` keep working. The tests are the
//! same; they overlap their waits. docs/measurements/tests.md measures what it saves and
//! which binaries use it.
//!
//! Included by the library's unit tests and, with `#[path]`, by the test binaries named in
//! docs/measurements/tests.md.

/// Run before `main`, while the process has one thread: setting a variable is sound there.
#[used]
#[cfg_attr(target_os = "linux", unsafe(link_section = ".init_array"))]
static SCALE_TEST_THREADS: extern "C" fn() = scale_test_threads;

extern "C" fn scale_test_threads() {
    // `--test-threads` needs no check: libtest reads the variable only without the flag.
    if std::env::var_os("RUST_TEST_THREADS").is_some() {
        return;
    }
    if let Ok(cores) = std::thread::available_parallelism() {
        // SAFETY: this runs from `.init_array`, before `main` and before any other thread
        // exists, so nothing reads or writes the environment concurrently
        unsafe {
            std::env::set_var(
                "RUST_TEST_THREADS",
                (super::TEST_THREADS_PER_CORE * cores.get()).to_string(),
            );
        }
    }
}
