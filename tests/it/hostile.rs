//! Issue 25: hostile file systems and inputs. Links out of the kernel (`create-pyproject`,
//! `clean-pyproject`), FIFOs and devices where a file is expected, endless or huge inputs
//! (matrix files, a zip bomb given to `matrix check-wheel`), a kernel name longer than the
//! Hub allows. Each runs the binary with a time bound and, where memory is the point, an
//! address-space bound, so a regression fails instead of hanging or filling the machine.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a bounded run gave: exit code (-1 when killed), stdout, stderr.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// What [`run_bounded`] saw.
pub(crate) struct Bounded {
    /// Exit code; -1 when killed by a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// It ran past its limit and was killed.
    pub killed: bool,
    pub took: Duration,
}

/// Run `cmd` for at most `limit`, killing it when it takes longer. Both pipes are drained by
/// threads, so a chatty child never blocks.
pub(crate) fn run_bounded(mut cmd: Command, limit: Duration) -> Bounded {
    use std::io::Read;
    let started = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let mut killed = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            killed = true;
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Bounded {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        killed,
        took: started.elapsed(),
    }
}

/// Limit `cmd`'s address space to `bytes`.
pub(crate) fn limit_memory(cmd: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Run the binary with `args` in `cwd`, killed (and the test failed) after `limit`, with at
/// most `memory` bytes of address space when given.
fn kb(cwd: &Path, args: &[&str], limit: Duration, memory: Option<u64>) -> Ran {
    let mut cmd = crate::util::kb_std();
    cmd.current_dir(cwd).args(args);
    if let Some(bytes) = memory {
        limit_memory(&mut cmd, bytes);
    }
    let b = run_bounded(cmd, limit);
    assert!(!b.killed, "`kernel-builder {}` still ran after {limit:?}", args.join(" "));
    Ran { code: b.code, stdout: b.stdout, stderr: b.stderr }
}

/// Make a FIFO (named pipe) at `path`.
pub(crate) fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

const SHORT: Duration = Duration::from_secs(30);

/// A copy of kernels/relu (no build/) in `dir/relu`, its path resolved.
pub(crate) fn relu(dir: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/relu");
    let kernel = dir.join("relu");
    for e in walkdir::WalkDir::new(&repo).into_iter().filter_map(Result::ok) {
        let rel = e.path().strip_prefix(&repo).unwrap();
        if rel.starts_with("build") {
            continue;
        }
        if e.file_type().is_dir() {
            fs::create_dir_all(kernel.join(rel)).unwrap();
        } else {
            fs::copy(e.path(), kernel.join(rel)).unwrap();
        }
    }
    kernel.canonicalize().unwrap()
}

/// [`relu`] with `lines` (a `kernel-depends = …` entry) at the top of its `[general]` table.
pub(crate) fn relu_depending(dir: &Path, lines: &str) -> PathBuf {
    let kernel = relu(dir);
    let toml = fs::read_to_string(kernel.join("build.toml")).unwrap();
    fs::write(kernel.join("build.toml"), toml.replacen("[general]\n", &format!("[general]\n{lines}"), 1))
        .unwrap();
    kernel
}

/// Every path under `dir` with its bytes (directories as empty), links as `-> target`.
fn tree(dir: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let what = if e.path_is_symlink() {
                format!("-> {}", fs::read_link(e.path()).unwrap().display())
            } else if e.file_type().is_file() {
                String::from_utf8_lossy(&fs::read(e.path()).unwrap()).into_owned()
            } else {
                String::new()
            };
            (rel, what)
        })
        .collect();
    out.sort();
    out
}

/// Case 5: with `cmake -> ../victim` in the kernel, `create-pyproject` wrote
/// `victim/kb-embed-metallib.cmake`. Now it refuses before writing anything.
#[test]
fn create_pyproject_never_writes_through_a_link_out_of_the_kernel() {
    let t = tempfile::tempdir().unwrap();
    let kernel = relu(t.path());
    let victim = t.path().join("victim");
    fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink("../victim", kernel.join("cmake")).unwrap();
    let before = tree(t.path());
    let r = kb(t.path(), &["create-pyproject", kernel.to_str().unwrap()], SHORT, None);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = victim.canonicalize().unwrap();
    let k = kernel.display();
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "error: `{k}/cmake/kb-embed-metallib.cmake` leads to `{}/kb-embed-metallib.cmake`, outside `{k}`: kernel-builder writes and removes files only inside it; remove the symbolic link `{k}/cmake`",
            v.display()
        )
    );
    assert_eq!(tree(t.path()), before, "nothing written anywhere");
}

/// Case 4: `clean-pyproject` followed a symlinked directory listed in the manifest and
/// deleted `victim/known.txt` and `victim/emptydir`. Now it refuses before removing anything.
#[test]
fn clean_pyproject_never_deletes_through_a_link() {
    use sha2::Digest;
    let t = tempfile::tempdir().unwrap();
    let kernel = relu(t.path());
    let victim = t.path().join("victim");
    fs::create_dir_all(victim.join("emptydir")).unwrap();
    fs::write(victim.join("known.txt"), "known\n").unwrap();
    std::os::unix::fs::symlink("../victim", kernel.join("link")).unwrap();
    let hash: String = sha2::Sha256::digest(b"known\n").iter().map(|b| format!("{b:02x}")).collect();
    fs::write(
        kernel.join(".kernel-builder-generated-v1"),
        format!("# generated\ndir link/emptydir\nfile {hash} link/known.txt\n"),
    )
    .unwrap();
    let before = tree(t.path());
    for dry in [true, false] {
        let mut args = vec!["clean-pyproject", kernel.to_str().unwrap()];
        if dry {
            args.push("--dry-run");
        }
        let r = kb(t.path(), &args, SHORT, None);
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        let k = kernel.display();
        assert_eq!(
            r.stderr.trim_end(),
            format!(
                "error: `{k}/link/known.txt` leads to `{}/known.txt`, outside `{k}`: kernel-builder writes and removes files only inside it; remove the symbolic link `{k}/link`",
                victim.canonicalize().unwrap().display()
            )
        );
        assert_eq!(r.stdout, "");
        assert_eq!(tree(t.path()), before, "nothing removed anywhere");
    }
}

/// Case 6: `build.toml` as a FIFO hung every command; as a link to `/dev/zero` the message
/// said "is 0 bytes". Both are now refused by name, at once.
#[test]
fn build_toml_that_is_a_fifo_or_a_device_is_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    let kernel = relu(t.path());
    let toml = kernel.join("build.toml");
    fs::remove_file(&toml).unwrap();
    mkfifo(&toml);
    let r = kb(t.path(), &["check-config", kernel.to_str().unwrap()], SHORT, None);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let want =
        format!("`{}` is a FIFO (named pipe), not a regular file; give the path of a file", toml.display());
    assert!(r.stderr.contains(&want), "{}", r.stderr);

    fs::remove_file(&toml).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &toml).unwrap();
    let r = kb(t.path(), &["check-config", kernel.to_str().unwrap()], SHORT, Some(1 << 30));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let want = format!("`{}` is a character device, not a regular file", toml.display());
    assert!(r.stderr.contains(&want) && !r.stderr.contains("0 bytes"), "{}", r.stderr);
}

/// Case 6: `list-variants --matrix-file /dev/zero` took 8.3 GB in 10 s. A device, a FIFO and
/// a file over the limit are refused, under a 1 GiB address space.
#[test]
fn a_matrix_file_that_is_endless_or_huge_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let kernel = relu(t.path());
    let k = kernel.to_str().unwrap();
    let r = kb(t.path(), &["list-variants", k, "--matrix-file", "/dev/zero"], SHORT, Some(1 << 30));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("`/dev/zero` is a character device, not a regular file; give the path of a file"),
        "{}",
        r.stderr
    );
    let big = t.path().join("big.json");
    fs::File::create(&big).unwrap().set_len(5 << 30).unwrap(); // sparse: no disk used
    let r = kb(t.path(), &["list-variants", k, "--matrix-file", big.to_str().unwrap()], SHORT, Some(1 << 30));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let want = format!(
        "`{}` is larger than 4 MiB, the most kernel-builder reads of a matrix file; check that this is the right file",
        big.display()
    );
    assert!(r.stderr.contains(&want), "{}", r.stderr);
}

/// `matrix check-wheel WHEEL` (in `dir`, under 512 MiB of address space) after `script`
/// (Python, given the path) made WHEEL; checked to fail.
fn check_wheel_made_by(dir: &Path, wheel: &Path, script: &str) -> Ran {
    assert!(Command::new("python3").args(["-c", script]).arg(wheel).status().unwrap().success());
    let r = kb(dir, &["matrix", "check-wheel", wheel.to_str().unwrap()], SHORT, Some(512 << 20));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    r
}

/// Case 6: `matrix check-wheel` on a 6 MB zip bomb took 6.3 GB. Each member it reads is now
/// cut at 1 MiB; under a 512 MiB address space the bomb is named as such.
#[test]
fn a_zip_bomb_wheel_is_refused_within_its_member_limit() {
    let t = tempfile::tempdir().unwrap();
    let wheel = t.path().join("torch-2.11.0-cp313-cp313-manylinux_2_28_x86_64.whl");
    // 1 GiB of spaces in torch/version.py, deflated to about 1 MB (python's zlib is fast).
    let script = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("torch-2.11.0.dist-info/METADATA", "Metadata-Version: 2.4\nName: torch\nVersion: 2.11.0\n\n")
    z.writestr("torch-2.11.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp313-cp313-manylinux_2_28_x86_64\n")
    with z.open("torch/version.py", "w", force_zip64=True) as f:
        chunk = b" " * (1 << 20)
        for _ in range(1024):
            f.write(chunk)
"#;
    let r = check_wheel_made_by(t.path(), &wheel, script);
    assert!(fs::metadata(&wheel).unwrap().len() < 8 << 20);
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "error: `{}`: `torch/version.py` unpacks to more than 1 MiB; a torch wheel's `torch/version.py` is a few kilobytes (is this a zip bomb?)",
            wheel.display()
        )
    );
    let fifo = t.path().join("fifo.whl");
    mkfifo(&fifo);
    let r = kb(t.path(), &["matrix", "check-wheel", fifo.to_str().unwrap()], SHORT, None);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("is a FIFO (named pipe), not a regular file"), "{}", r.stderr);
}

/// Found by attacking the fixes (minor e): a zip whose central directory claims 2,000,000
/// entries took ~1.2 GB (the reader allocates for every entry listed when the directory starts
/// that far into the file). The count and size listed are now checked before the directory
/// is read, under 512 MiB of address space.
#[test]
fn a_wheel_listing_millions_of_entries_is_refused_before_reading_them() {
    let t = tempfile::tempdir().unwrap();
    let wheel = t.path().join("torch-2.11.0-cp313-cp313-manylinux_2_28_x86_64.whl");
    // A sparse file (no disk used): a hole, then the end records, which claim 2,000,000
    // entries (zip64) in a directory as large as that many entries take, 2 MB into the file.
    let script = r#"
import struct, sys
n = 2_000_000
start, size = n, 46 * n
zip64 = struct.pack("<IQHHIIQQQQ", 0x06064b50, 44, 45, 45, 0, 0, n, n, size, start)
locator = struct.pack("<IIQI", 0x07064b50, 0, start + size, 1)
end = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
with open(sys.argv[1], "wb") as f:
    f.seek(start + size)
    f.write(zip64 + locator + end)
"#;
    let r = check_wheel_made_by(t.path(), &wheel, script);
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "error: `{}`: its central directory lists 2000000 entries in 92000000 bytes; kernel-builder reads at most 100000 entries and 32 MiB (a torch wheel has about 13,000 entries; is this a zip bomb?)",
            wheel.display()
        )
    );
}

/// Case 9: a 300-character kernel name passed check-config, then failed the build. Over the
/// Hub's 96 characters is now an error at its line; 96 itself passes.
#[test]
fn a_kernel_name_longer_than_the_hub_allows_is_a_config_error_at_its_line() {
    let t = tempfile::tempdir().unwrap();
    let kernel = relu(t.path());
    let toml = fs::read_to_string(kernel.join("build.toml")).unwrap();
    assert!(toml.contains("name = \"relu\""));
    for (len, ok) in [(96, true), (97, false), (300, false)] {
        let name = format!("r{}", "e".repeat(len - 1));
        fs::write(kernel.join("build.toml"), toml.replace("name = \"relu\"", &format!("name = \"{name}\"")))
            .unwrap();
        let r = kb(t.path(), &["check-config", kernel.to_str().unwrap()], SHORT, None);
        assert_eq!(r.code == 0, ok, "{len}: {}{}", r.stdout, r.stderr);
        if !ok {
            let line = toml.lines().position(|l| l.starts_with("name = ")).unwrap() + 1;
            // A line wider than diagnostics draw (200 columns) is shown in the plain form.
            let place = if len < 190 {
                format!("[{}:{line}:8]", kernel.join("build.toml").display())
            } else {
                format!("{}:{line}:8: error: ", kernel.join("build.toml").display())
            };
            for want in [
                format!("the kernel name is {len} characters long; a Hub repository name, which it becomes, has at most 96"),
                place,
                "help: shorten `name` to 96 characters or fewer".to_owned(),
            ] {
                assert!(r.stderr.contains(&want), "{len}: wants {want:?}:\n{}", r.stderr);
            }
        }
    }
}

/// Found by attacking the fixes (minor d): kernel-depends ids like `o/..` and `o/n?a=b`
/// passed check-config and went into Hub URLs as they were. Each is now an error at its line,
/// by the Hub's own rules.
#[test]
fn kernel_depends_ids_follow_the_hub_rules_at_their_line() {
    let t = tempfile::tempdir().unwrap();
    let deps = "kernel-depends = [\n  { repo-id = \"o/..\", version = 1 },\n  { repo-id = \"o/n?a=b\", version = 1 },\n  { repo-id = \"o/x\\u001b[2J\", version = 1 },\n]\n";
    let kernel = relu_depending(t.path(), deps);
    let r = kb(t.path(), &["check-config", kernel.to_str().unwrap()], SHORT, None);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let at = kernel.join("build.toml").display().to_string();
    for want in [
        "`o/..` is not a Hub repository id: its name starts or ends with `-` or `.`, which the Hub does not allow".to_owned(),
        format!("[{at}:3:"),
        "`o/n?a=b` is not a Hub repository id: its name has the character `?`; the Hub allows letters, digits, `-`, `_` and `.`".to_owned(),
        format!("[{at}:4:"),
        // A terminal escape in the file is shown escaped (minor a).
        "`o/x\\u{1b}[2J` is not a Hub repository id: its name has the character `\\u{1b}`".to_owned(),
        format!("[{at}:5:"),
    ] {
        assert!(r.stderr.contains(&want), "wants {want:?}:\n{}", r.stderr);
    }
    assert!(!r.stderr.contains('\x1b'), "{:?}", r.stderr);
}

/// Found by attacking the fixes (minor b): `lock-kernel-deps` waited a fixed 60 s for each
/// answer (three times) whatever `KERNEL_BUILDER_HUB_TIMEOUT` said. Against a server that
/// accepts and never answers, it now gives up after the timeout set, and says which it was.
#[test]
fn lock_kernel_deps_honours_the_hub_timeout() {
    let t = tempfile::tempdir().unwrap();
    let kernel = relu_depending(
        t.path(),
        "kernel-depends = [{ repo-id = \"kernels-community/relu\", version = 1 }]\n",
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    let mut cmd = crate::util::kb_std();
    cmd.current_dir(t.path())
        .args(["lock-kernel-deps", kernel.to_str().unwrap()])
        .env("HF_ENDPOINT", &url)
        .env("HF_HOME", t.path().join("hf"))
        .env_remove("HF_TOKEN")
        .env("KERNEL_BUILDER_CACHE_DIR", t.path().join("cache"))
        .env("KERNEL_BUILDER_HUB_TIMEOUT", "1");
    let b = run_bounded(cmd, Duration::from_secs(60));
    assert!(!b.killed, "lock-kernel-deps still ran after 60 s:\n{}", b.stderr);
    assert_eq!(b.code, 1, "{}", b.stderr);
    let want = format!(
        "GET {url}/api/kernels/kernels-community/relu/refs failed: no answer in time (receive response; kernel-builder waits 1 s for an answer, KERNEL_BUILDER_HUB_TIMEOUT sets it) (after 3 attempts)"
    );
    assert!(b.stderr.contains(&want), "{}", b.stderr);
}

/// Whether process `pid` still runs (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// `build-and-copy` with the fake toolchain of `bin`, its stderr collected as it comes.
fn spawn_build(kernel: &Path, bin: &Path, py: &Path, cache: &Path) -> (std::process::Child, Stderr) {
    use std::io::Read;
    let mut child = crate::util::kb_std()
        .args(["build-and-copy", "--nix", "never", "--python", py.to_str().unwrap()])
        .arg(kernel)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env_remove("CXX")
        .env("KERNEL_BUILDER_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (t, mut pipe) = (text.clone(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            t.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (child, Stderr { text, reader })
}

/// A child's stderr, read on a thread as it comes.
struct Stderr {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Stderr {
    /// What came so far.
    fn now(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// All of it, once the child has exited: the reader may still be behind the child's last
    /// lines (seen on a loaded 2-core CI machine: the text was empty), so wait (up to [`SHORT`])
    /// for it to reach the end of the pipe.
    fn all(self) -> String {
        within(SHORT, || self.reader.is_finished());
        self.now()
    }
}

fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// Case 7: after `kill -9` of `build-and-copy`, the configure step kept running in the work
/// directory the next build uses. Now the step is told to stop when the tool dies (a parent-death
/// signal), and a process it left that was not told (here a `sleep` its script started,
/// standing for a compiler) keeps the work directory locked: the next build says so and waits
/// for it instead of sharing the directory.
#[test]
fn a_killed_build_leaves_no_step_running_and_the_next_waits_for_orphans() {
    use super::compiled::{fake_python, kernel, script};
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cpu", "");
    let py = fake_python(t.path(), "null");
    let bin = t.path().join("env/bin");
    let mark = t.path().join("mark");
    fs::create_dir(&mark).unwrap();
    let m = mark.display();
    script(
        &bin.join("cmake"),
        &format!(
            "[ \"$1\" = --version ] && {{ echo 'cmake version 4.4.5'; exit 0; }}\necho $$ >> {m}/cmake-runs\n[ -e {m}/second ] && exit 3\nsleep 120 &\necho $! > {m}/orphan\nwait"
        ),
    );
    script(&bin.join("ninja"), "[ \"$1\" = --version ] && echo 1.13.2 || exit 3");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    let cache = t.path().join("cache");
    let runs = || fs::read_to_string(mark.join("cmake-runs")).unwrap_or_default();

    let (mut first, err) = spawn_build(&k, &bin, &py, &cache);
    let started = within(Duration::from_secs(60), || mark.join("orphan").exists());
    if !started {
        let _ = first.kill();
        panic!("the configure step never ran:\n{}", err.now());
    }
    let step: i32 = runs().trim().parse().unwrap();
    let orphan: i32 = within(Duration::from_secs(5), || {
        fs::read_to_string(mark.join("orphan")).is_ok_and(|s| s.trim().parse::<i32>().is_ok())
    })
    .then(|| fs::read_to_string(mark.join("orphan")).unwrap().trim().parse().unwrap())
    .unwrap();
    first.kill().unwrap(); // SIGKILL: no handler runs
    first.wait().unwrap();
    let step_gone = within(Duration::from_secs(10), || !alive(step));
    // Clean up whatever the check finds, before asserting.
    // SAFETY: plain kill(2) of processes this test started.
    let cleanup = |pids: &[i32]| {
        pids.iter().for_each(|p| unsafe {
            libc::kill(*p, libc::SIGKILL);
        })
    };
    if !step_gone {
        cleanup(&[step, orphan]);
        panic!("the configure step (pid {step}) still runs after the build was killed");
    }
    assert!(alive(orphan), "the stand-in compiler was not told, and runs on");

    fs::write(mark.join("second"), "").unwrap();
    let (mut second, err) = spawn_build(&k, &bin, &py, &cache);
    let waits = within(Duration::from_secs(60), || err.now().contains("is still in use"));
    let ran_meanwhile = runs().lines().count();
    cleanup(&[orphan]);
    let finished = within(Duration::from_secs(60), || second.try_wait().unwrap().is_some());
    if !finished {
        let _ = second.kill();
    }
    let err = err.all();
    assert!(waits, "the next build did not wait:\n{err}");
    assert_eq!(ran_meanwhile, 1, "the next build configured while the orphan ran:\n{err}");
    assert!(finished, "the next build did not go on once the orphan ended:\n{err}");
    assert_eq!(runs().lines().count(), 2, "{err}");
    let work = fs::read_dir(cache.join("cmake-v1")).unwrap().next().unwrap().unwrap().path();
    // The variant's directory (the key directory also records its kernel in `kernel-dir`).
    let variant = fs::read_dir(&work).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    assert!(
        err.contains(&format!("note: the work directory `{}` is still in use by another build, or by processes of an earlier one that was killed; waiting for them to finish", variant.display())),
        "{err}"
    );
}

/// `init --overwrite kk` where `kk/<link>` is a symbolic link to a sibling `victim/`: the
/// scratch directory, the victim, the tree before the call, and what the call did.
fn init_over_a_link(link: &str) -> (tempfile::TempDir, PathBuf, Vec<(String, String)>, Ran) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("kk");
    let victim = t.path().join("victim");
    fs::create_dir_all(&dir).unwrap();
    fs::create_dir_all(&victim).unwrap();
    std::os::unix::fs::symlink("../victim", dir.join(link)).unwrap();
    let before = tree(t.path());
    let r = kb(
        t.path(),
        &["init", "--name", "myorg/kk", "--template", "torch", "--overwrite", "kk"],
        SHORT,
        None,
    );
    (t, victim, before, r)
}

/// `init --overwrite` into a directory holding `torch-ext -> ../victim` wrote the generated
/// package into `victim`. Now it refuses, naming the link, before writing anything.
#[test]
fn init_never_writes_through_a_link_out_of_the_directory() {
    let (t, victim, before, r) = init_over_a_link("torch-ext");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = victim.canonicalize().unwrap();
    assert_eq!(
        r.stderr.lines().next().unwrap_or_default(),
        format!(
            "error: cannot write `kk/torch-ext/kk/__init__.py`: `kk/torch-ext/kk/__init__.py` leads to `{}/kk/__init__.py`, outside `kk`: kernel-builder writes and removes files only inside it; remove the symbolic link `kk/torch-ext`",
            v.display()
        ),
        "{}",
        r.stderr
    );
    assert_eq!(tree(t.path()), before, "nothing written anywhere");
}

/// The CMake work directories live in the cache: a link there (`cmake-v1 -> ../victim`)
/// would have the build create, and on a stale configuration delete, directories elsewhere.
/// The build refuses before creating anything.
#[test]
fn a_link_in_the_cache_does_not_lead_the_build_out_of_it() {
    use super::compiled::{fake_python, kernel, script};
    let t = tempfile::tempdir().unwrap();
    let k = t.path().join("k");
    kernel(&k, "cpu", "");
    let py = fake_python(t.path(), "null");
    let bin = t.path().join("env/bin");
    script(&bin.join("cmake"), "[ \"$1\" = --version ] && echo 'cmake version 4.4.5' || exit 3");
    script(&bin.join("ninja"), "[ \"$1\" = --version ] && echo 1.13.2 || exit 3");
    script(&bin.join("c++"), "echo 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'");
    let cache = t.path().join("cache");
    let victim = t.path().join("victim");
    fs::create_dir_all(&cache).unwrap();
    fs::create_dir_all(&victim).unwrap();
    std::os::unix::fs::symlink("../victim", cache.join("cmake-v1")).unwrap();
    let (mut child, err) = spawn_build(&k, &bin, &py, &cache);
    let finished = within(SHORT, || child.try_wait().unwrap().is_some());
    if !finished {
        let _ = child.kill();
    }
    let err = err.all();
    assert!(finished, "{err}");
    assert!(!child.wait().unwrap().success(), "{err}");
    assert!(
        err.contains(&format!("outside `{}`: kernel-builder writes and removes files only inside it; remove the symbolic link `{}/cmake-v1`", cache.display(), cache.display())),
        "{err}"
    );
    assert_eq!(fs::read_dir(&victim).unwrap().count(), 0, "nothing created in the link's target");
}

/// Found by attacking the fixes (B4): `init --overwrite` into a directory whose `.git` is a
/// link out of it made `git init`/`git add` write a repository there. Now it refuses, naming
/// the link, and writes nothing.
#[test]
fn init_never_makes_a_repository_through_a_git_link() {
    let (t, _victim, before, r) = init_over_a_link(".git");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("remove the symbolic link `kk/.git`"), "{}", r.stderr);
    assert_eq!(tree(t.path()), before, "nothing written anywhere");
}

/// Found by attacking the fixes (B1): a kernel shipped with
/// `build/.kernel-builder-tmp-0/old -> ../../..` made the next build "restore" the directories
/// beside the kernel into its `build/`. A leftover temporary directory's `old/` is used only
/// when it is a real directory; the link is removed with the leftover, what it names is untouched.
#[test]
fn a_leftover_old_link_never_pulls_files_into_build() {
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("project");
    fs::create_dir_all(&project).unwrap();
    fs::write(project.join("main.c"), "precious").unwrap();
    let k = t.path().join("evil");
    super::util::copy_kernel("vector-add-helion", &k);
    let leftover = k.join("build/.kernel-builder-tmp-0");
    fs::create_dir_all(&leftover).unwrap();
    std::os::unix::fs::symlink("../../..", leftover.join("old")).unwrap();
    let r = kb(
        &k,
        &["build-and-copy", "--nix", "never", "--variant", "torch-cuda", "."],
        Duration::from_secs(120),
        None,
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(fs::read_to_string(project.join("main.c")).unwrap(), "precious");
    let mut built: Vec<String> = fs::read_dir(k.join("build"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    built.sort();
    assert_eq!(built, ["hashes.json", "torch-cuda"], "{}", r.stderr);
    assert!(!r.stderr.contains("restored"), "{}", r.stderr);
}

/// Found by a fresh user trying to break the fixes: the lines a diagnostic quotes from
/// build.toml reached the terminal raw, so an escape sequence in a comment set the window
/// title and cleared the screen (with `KERNEL_BUILDER_PLAIN=1` too). Quoted lines now show
/// such characters as `?`, and the reason names the character.
#[test]
fn a_diagnostic_never_quotes_terminal_controls_from_build_toml() {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("build.toml"), "name = \"x\"\n# \x1b]0;title\x07 \x1b[2J comment\n[general\n")
        .unwrap();
    for plain in ["0", "1"] {
        let out = crate::util::kb_std()
            .args(["check-config", t.path().to_str().unwrap()])
            .env("KERNEL_BUILDER_PLAIN", plain)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let all = [out.stdout, out.stderr].concat();
        assert!(!all.iter().any(|b| matches!(b, 0x1b | 0x07)), "{}", String::from_utf8_lossy(&all));
        let text = String::from_utf8(all).unwrap();
        assert!(text.contains("not valid TOML: the control character U+001B may not stand here"), "{text}");
        assert!(text.contains("# ?]0;title? ?[2J comment"), "{text}");
    }
}
