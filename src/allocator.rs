//! How the process asks the C allocator for memory: one setting, made before anything else.
//!
//! The binary uses the system allocator (glibc's malloc on Linux). glibc serves a request of
//! at least its *mmap threshold* with a mapping of its own, given back to the system when
//! it is freed; smaller ones come from its arenas, whose free space stays resident until it
//! is reused. The threshold starts at 128 KiB but moves: every time a mapped block is
//! freed, the threshold rises to that block's size (up to 32 MiB). A job frees large
//! blocks all the time (a sort's buffer when a run is written, timely's batches, read and
//! write buffers), so after the first stage almost every large buffer comes from an arena
//! instead, and the arenas keep whatever such buffers left free between them. That memory
//! is not the job's, and it grows with the corpus: the more runs a sort writes, the more
//! holes. Measured with glibc's `malloc_stats` inside a threshold-mode run of 50 GB of
//! text (`-w 2 --memory-limit 4G`, 2026-11-28, docs/performance.md): at the end of the
//! search the arenas held 345 MB for 100 MB in use, and during verification 1,173 MB for
//! 440 to 570 MB in use.
//!
//! So the threshold is fixed at [`MMAP_THRESHOLD`] (fixing it also stops it from moving):
//! buffers of that size or more are always mapped and always given back. Measured on the
//! same corpus (threshold mode, peak resident memory): 10 GB 1,221 → 1,196 MB, 50 GB
//! 1,398 → 1,280 MB, the same wall time within the noise. Another allocator was tried and
//! not kept: mimalloc and jemalloc (preloaded) both peaked near 2.2 GB at 10 GB.
//!
//! The setting is the binary's, not the libraries': a program that embeds them (the Python
//! module) keeps its own allocator's settings. `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=N`
//! overrides nothing here: the call below comes after glibc reads it.

/// The mmap threshold the binary sets (bytes): a request of at least this size is mapped on
/// its own and unmapped when freed. 256 KiB: a run's read buffer
/// ([`neardup_io::spill::RUN_READ_BUFFER`]) and everything larger.
pub const MMAP_THRESHOLD: usize = 256 << 10;

/// Sets the allocator up as the module docs say. Called first thing in `main`, before any
/// thread starts.
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes malloc's parameters; it is called before any other
    // thread exists, and a value it refuses leaves the default in place (it returns 0).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
    }
}
