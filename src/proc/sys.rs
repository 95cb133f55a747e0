//! The few libc calls that modules outside the process layer need, behind
//! safe wrappers. (A stand-in holding what this branch needs until the
//! process layer's full set lands; theirs wins on merge.)

/// The real uid: whose directories loopx's state and checkpoints live in.
pub fn uid() -> u32 {
    // SAFETY: getuid takes nothing and cannot fail.
    unsafe { libc::getuid() }
}
