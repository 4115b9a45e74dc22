//! neardup for Python: `import neardup`.
//!
//! The package is a thin layer over the same crates the `neardup` binary uses, so a
//! fingerprint, a comparison, a run or an index query gives in Python exactly what the
//! command line gives:
//!
//! - [`fingerprint`]: texts to simhashes (or MinHash signatures), as `neardup hash`; a list
//!   in gives a list out, a pyarrow array in gives a pyarrow array out.
//! - [`compare`]: two texts measured as `neardup compare --json` measures them
//!   ([`neardup_core::verdict::compare_texts`]).
//! - [`run`]: a whole job, configured with the dataflow crate's builder as `neardup run` is,
//!   run with the GIL released; returns `summary.json` as a dict.
//! - [`Index`]: a saved index (`neardup run --index`), queried as `neardup query` does.
//!
//! Errors: a configuration the library refuses raises `ValueError` with the library's
//! message; an input or output problem raises `neardup.NeardupError`, whose message names the
//! file and line as the command line's does.

use std::path::PathBuf;
use std::sync::Arc;

use neardup_core::features::StopWords;
use neardup_core::verdict::compare_texts;
use neardup_core::{Fingerprinter, Method, Scheme, SchemeName};
use neardup_dataflow::config::{options, JobConfig, JobInput, Parallelism, VerifyMode};
use neardup_dataflow::{run_job, JobError, Progress};
use neardup_io::index::answer::{self, Answerer, KName, Query};
use neardup_io::index::Verify;
use neardup_io::record::{FieldSpec, DEFAULT_ID_FIELD, DEFAULT_TEXT_FIELD};
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

pyo3::create_exception!(
    neardup,
    NeardupError,
    PyException,
    "An error of the neardup library: an input that cannot be read or parsed, an output that cannot be written, a run that failed. The message names the file (and line) as the command line does."
);

/// An error of the library as `NeardupError`, with its message (and causes) as the command
/// line prints them.
fn library_error(err: impl std::error::Error) -> PyErr {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    NeardupError::new_err(message)
}

/// A refused configuration as `ValueError`.
fn refused(message: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(message.to_string())
}

/// The fingerprint scheme from the keyword arguments every function shares: a preset name,
/// NFKC, and stop words (`"english"`, a path to a word list, or a list of words).
fn make_scheme(name: &str, nfkc: bool, stop_words: Option<&Bound<'_, PyAny>>) -> PyResult<Scheme> {
    let Some(preset) = SchemeName::parse(name) else {
        let names: Vec<&str> = SchemeName::ALL.iter().map(|n| n.as_str()).collect();
        return Err(refused(format!(
            "scheme {name:?} is not one of {}",
            names.join(", ")
        )));
    };
    let mut scheme = Scheme::named(preset);
    scheme.features.nfkc = nfkc;
    if let Some(words) = stop_words {
        scheme = scheme.with_stop_words(stop_word_list(words)?);
    }
    Ok(scheme)
}

/// `stop_words=`: `"english"` (the built-in list), a path to a file with one word per line
/// (`#` starts a comment), or a list of words.
fn stop_word_list(words: &Bound<'_, PyAny>) -> PyResult<StopWords> {
    let (list, what) = if let Ok(text) = words.extract::<String>() {
        if text == "english" {
            return Ok(StopWords::english());
        }
        let content = std::fs::read_to_string(&text).map_err(|e| {
            NeardupError::new_err(format!("cannot read the stop-word list {text:?}: {e}"))
        })?;
        (
            StopWords::parse(&content),
            format!("the stop-word list {text:?}"),
        )
    } else if let Ok(path) = words.extract::<PathBuf>() {
        let content = std::fs::read_to_string(&path).map_err(|e| {
            NeardupError::new_err(format!(
                "cannot read the stop-word list {}: {e}",
                path.display()
            ))
        })?;
        (
            StopWords::parse(&content),
            format!("the stop-word list {}", path.display()),
        )
    } else {
        let list: Vec<String> = words.extract().map_err(|_| {
            PyTypeError::new_err(
                "stop_words must be \"english\", a path to a word list, or a list of words",
            )
        })?;
        (StopWords::parse(&list.join("\n")), "stop_words".to_string())
    };
    if list.is_empty() {
        return Err(refused(format!(
            "{what} holds no words (expected one word per line)"
        )));
    }
    Ok(list)
}

/// One document's fingerprint: a simhash, or a MinHash signature.
enum Print {
    Simhash(u64),
    Signature(Vec<u64>),
}

/// Fingerprints every text (`None` stays `None`).
fn fingerprint_all(scheme: &Scheme, texts: &[Option<String>]) -> Vec<Option<Print>> {
    let minhash = matches!(scheme.method, Method::MinHash { .. });
    let mut fingerprinter = Fingerprinter::new(scheme.clone());
    texts
        .iter()
        .map(|text| {
            let text = text.as_deref()?;
            let fp = fingerprinter.fingerprint(text);
            Some(if minhash {
                Print::Signature(fingerprinter.signature().to_vec())
            } else {
                Print::Simhash(fp.simhash)
            })
        })
        .collect()
}

/// Whether `value` is an object of pyarrow (an array or a chunked array).
fn is_pyarrow(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    let module: String = value.get_type().module()?.extract()?;
    Ok(module.starts_with("pyarrow"))
}

/// The texts of a list (or any iterable) of `str` and `None`.
fn texts_of(value: &Bound<'_, PyAny>) -> PyResult<Vec<Option<String>>> {
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "texts must be a list of str (or a pyarrow string array), not one str: use [text]",
        ));
    }
    let mut texts = Vec::new();
    for (i, item) in value.try_iter()?.enumerate() {
        let item = item?;
        if item.is_none() {
            texts.push(None);
        } else {
            texts.push(Some(item.extract::<String>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "texts[{i}] is a {}, not a str",
                    item.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?));
        }
    }
    Ok(texts)
}

/// The texts of one pyarrow array of strings (string, large_string or string_view).
fn arrow_texts(
    array: &Bound<'_, PyAny>,
    pa: &Bound<'_, PyModule>,
) -> PyResult<Vec<Option<String>>> {
    let types = pa.getattr("types")?;
    let data_type = array.getattr("type")?;
    let stringy = ["is_string", "is_large_string", "is_string_view"]
        .iter()
        .any(|test| {
            types
                .call_method1(*test, (&data_type,))
                .and_then(|r| r.is_truthy())
                .unwrap_or(false)
        });
    if !stringy {
        return Err(PyTypeError::new_err(format!(
            "a pyarrow array of strings is needed, not of {}",
            data_type.str()?
        )));
    }
    array.call_method0("to_pylist")?.extract()
}

/// The fingerprints as Python values: `int` (simhash) or `list[int]` (signature).
fn prints_to_list<'py>(
    py: Python<'py>,
    prints: Vec<Option<Print>>,
) -> PyResult<Bound<'py, PyList>> {
    let items: Vec<Py<PyAny>> = prints
        .into_iter()
        .map(|p| -> PyResult<Py<PyAny>> {
            Ok(match p {
                None => py.None(),
                Some(Print::Simhash(h)) => h.into_pyobject(py)?.into_any().unbind(),
                Some(Print::Signature(s)) => s.into_pyobject(py)?.into_any().unbind(),
            })
        })
        .collect::<PyResult<_>>()?;
    PyList::new(py, items)
}

/// Fingerprints of texts, as `neardup hash` computes them.
///
/// `texts`: a list of `str` (`None` gives `None`), or a pyarrow array or chunked array of
/// strings (nulls stay null). A simhash scheme gives one 64-bit `int` per text (0 for an
/// empty document, one with no word with a letter); `minhash` gives the signature, a list of
/// `int`. A pyarrow input gives a pyarrow output of the same kind: `uint64`, or
/// `list<uint64>` for signatures.
#[pyfunction]
#[pyo3(signature = (texts, scheme = "simhash-doc", nfkc = false, stop_words = None))]
fn fingerprint<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    scheme: &str,
    nfkc: bool,
    stop_words: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let scheme = make_scheme(scheme, nfkc, stop_words)?;
    if !is_pyarrow(texts)? {
        let texts = texts_of(texts)?;
        let prints = py.detach(|| fingerprint_all(&scheme, &texts));
        return Ok(prints_to_list(py, prints)?.into_any());
    }
    let pa = py.import("pyarrow")?;
    let out_type = match scheme.method {
        Method::MinHash { .. } => pa.call_method1("list_", (pa.call_method0("uint64")?,))?,
        Method::Simhash(_) => pa.call_method0("uint64")?,
    };
    let one = |array: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> {
        let texts = arrow_texts(array, &pa)?;
        let prints = py.detach(|| fingerprint_all(&scheme, &texts));
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("type", &out_type)?;
        pa.call_method("array", (prints_to_list(py, prints)?,), Some(&kwargs))
    };
    if texts.is_instance(&pa.getattr("ChunkedArray")?)? {
        let chunks: Vec<Bound<'py, PyAny>> = texts
            .getattr("chunks")?
            .try_iter()?
            .map(|c| one(&c?))
            .collect::<PyResult<_>>()?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("type", &out_type)?;
        return pa.call_method("chunked_array", (chunks,), Some(&kwargs));
    }
    if texts.is_instance(&pa.getattr("Array")?)? {
        return one(texts);
    }
    Err(PyTypeError::new_err(format!(
        "texts must be a list of str or a pyarrow array of strings, not {}",
        texts.get_type().name()?
    )))
}

/// `json.loads(text)`.
fn json_to_python<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// Two texts side by side: the fields of `neardup compare --json` (without the documents'
/// `source`): fingerprints, Hamming distance or MinHash estimate, the exact Jaccard
/// similarity and containments of their word `shingle`-shingles, the verdict at the default
/// thresholds and the reason for it.
#[pyfunction]
#[pyo3(signature = (a, b, scheme = "simhash-doc", nfkc = false, stop_words = None, shingle = neardup_core::similarity::DEFAULT_JACCARD_SHINGLE))]
fn compare<'py>(
    py: Python<'py>,
    a: &str,
    b: &str,
    scheme: &str,
    nfkc: bool,
    stop_words: Option<&Bound<'py, PyAny>>,
    shingle: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if shingle == 0 {
        return Err(refused("shingle must be at least 1"));
    }
    let scheme = make_scheme(scheme, nfkc, stop_words)?;
    let c = py.detach(|| compare_texts(&scheme, shingle, a, b));
    let value = serde_json::json!({
        "scheme": c.scheme,
        "a": c.a,
        "b": c.b,
        "hamming": c.hamming,
        "cosine_estimate": c.cosine_estimate,
        "jaccard": c.jaccard,
        "jaccard_shingle": c.jaccard_shingle,
        "containment_a_in_b": c.containment_a_in_b,
        "containment_b_in_a": c.containment_b_in_a,
        "minhash_jaccard_estimate": c.minhash_jaccard_estimate,
        "exact_duplicate": c.exact_duplicate,
        "verdict": c.decision.verdict.name(),
        "reason": c.decision.reason(),
    });
    json_to_python(py, &value.to_string())
}

/// `verify=`: `None` (the scheme's default), `"none"`, `"jaccard"` or `"minhash"`.
fn verify_mode(verify: Option<&str>) -> PyResult<Option<VerifyMode>> {
    Ok(match verify {
        None => None,
        Some("none") => Some(VerifyMode::None),
        Some("jaccard") => Some(VerifyMode::Jaccard),
        Some("minhash") => Some(VerifyMode::MinHash),
        Some(other) => {
            return Err(refused(format!(
                "verify {other:?} is not one of none, jaccard, minhash"
            )))
        }
    })
}

/// `inputs=`: one path or glob, or a list of them.
fn patterns(inputs: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let one = |v: &Bound<'_, PyAny>| -> PyResult<String> {
        Ok(v.extract::<PathBuf>()?.to_string_lossy().into_owned())
    };
    if inputs.is_instance_of::<PyString>() || inputs.hasattr("__fspath__")? {
        return Ok(vec![one(inputs)?]);
    }
    inputs.try_iter()?.map(|v| one(&v?)).collect()
}

/// Runs neardup over `inputs` (files, directories or globs: JSONL, Parquet, WARC, ARC),
/// writing the run's tables to `output` as `neardup run` does, with the GIL released (other
/// Python threads go on). Returns `output/summary.json` as a dict.
///
/// The options are those of `neardup run`, by their long names: `scheme`, `nfkc`,
/// `stop_words`, `k`, `tables`, `threshold`, `verify`, `min_jaccard`, `keep`, `workers`,
/// `exact`, `overwrite`, `skip_invalid`, `text_field`, `id_field` (`None`: records have no
/// id), `memory_limit`, `table_rounds`.
#[pyfunction]
#[pyo3(signature = (
    inputs, output, *, scheme = "simhash-doc", nfkc = false, stop_words = None,
    k = neardup_dataflow::config::DEFAULT_K, tables = neardup_dataflow::config::DEFAULT_TABLES,
    threshold = None, verify = None, min_jaccard = None, keep = None, workers = 1,
    exact = true, overwrite = false, skip_invalid = false,
    text_field = DEFAULT_TEXT_FIELD, id_field = Some(DEFAULT_ID_FIELD),
    memory_limit = "auto", table_rounds = "auto"
))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    output: PathBuf,
    scheme: &str,
    nfkc: bool,
    stop_words: Option<&Bound<'py, PyAny>>,
    k: u32,
    tables: &str,
    threshold: Option<f64>,
    verify: Option<&str>,
    min_jaccard: Option<f64>,
    keep: Option<&str>,
    workers: usize,
    exact: bool,
    overwrite: bool,
    skip_invalid: bool,
    text_field: &str,
    id_field: Option<&str>,
    memory_limit: &str,
    table_rounds: &str,
) -> PyResult<Bound<'py, PyAny>> {
    if workers == 0 {
        return Err(refused("workers must be at least 1"));
    }
    let scheme = make_scheme(scheme, nfkc, stop_words)?;
    let patterns = patterns(inputs)?;
    let files = neardup_io::input::scan_inputs(&patterns, false)
        .map_err(library_error)?
        .files;
    let fields = FieldSpec {
        text_field: text_field.to_string(),
        id_field: id_field.map(str::to_string),
        extra_field: None,
        ..Default::default()
    };
    let config = JobConfig::builder(JobInput::Documents { files, fields }, output.clone())
        .scheme(scheme)
        .exact(exact)
        .skip_invalid(skip_invalid)
        .threshold(threshold)
        .verify(verify_mode(verify)?)
        .min_jaccard(min_jaccard)
        .k(k)
        .tables(tables)
        .keep_or_default(keep)
        .overwrite(overwrite)
        .parallelism(Parallelism::local(workers))
        .table_rounds(options::table_rounds(table_rounds).map_err(refused)?)
        .memory_limit(options::memory_limit(memory_limit).map_err(refused)?)
        .command_line(vec!["neardup.run (Python)".to_string()])
        .build()
        .map_err(refused)?;
    let result = py.detach(|| run_job(config, Arc::new(Progress::default())));
    match result {
        Ok(_) => {}
        Err(JobError::Config(e)) => return Err(refused(e)),
        Err(JobError::Failed(summary)) => {
            let more = match summary.errors.len().saturating_sub(1) {
                0 => String::new(),
                n => format!(" (and {n} more errors)"),
            };
            return Err(NeardupError::new_err(format!(
                "{}{more}; no _SUCCESS was written in {}",
                summary.errors.first().cloned().unwrap_or_default(),
                output.display()
            )));
        }
        Err(e) => return Err(library_error(e)),
    }
    let path = output.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| NeardupError::new_err(format!("cannot read {}: {e}", path.display())))?;
    json_to_python(py, &text)
}

/// A saved index (made by `neardup run --index`), opened once and queried many times.
#[pyclass(frozen, module = "neardup")]
struct Index {
    index: neardup_io::index::Index,
    /// The index's scheme, to fingerprint text queries with; or why it cannot be rebuilt.
    scheme: Result<Scheme, String>,
    path: PathBuf,
}

#[pymethods]
impl Index {
    /// Opens the index in `path`, checking its files' checksums.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Index> {
        let index = py
            .detach(|| neardup_io::index::Index::open(&path, Verify::Checksums))
            .map_err(library_error)?;
        let scheme = answer::simhash_scheme(index.manifest()).map_err(|e| e.to_string());
        Ok(Index {
            index,
            scheme,
            path,
        })
    }

    /// The largest distance the index answers (the `k` it was made with).
    #[getter]
    fn k(&self) -> u32 {
        self.index.k()
    }

    /// The indexed documents within `k` bits (default: the index's k) of each text: one list
    /// per text, each match a dict with `id`, `doc_id`, `hamming` and `cluster_id` (`None`
    /// for a document in no cluster), sorted by `doc_id`. An empty text matches nothing.
    #[pyo3(signature = (texts, k = None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        k: Option<u32>,
    ) -> PyResult<Bound<'py, PyList>> {
        let k = answer::check_k(self.index.k(), k, KName::Keyword).map_err(refused)?;
        let scheme = self.scheme.as_ref().map_err(|e| {
            NeardupError::new_err(format!(
                "{}: cannot fingerprint text queries: {e}",
                self.path.display()
            ))
        })?;
        let texts = if is_pyarrow(texts)? {
            texts.call_method0("to_pylist")?.extract()?
        } else {
            texts_of(texts)?
        };
        let index = &self.index;
        let answers = py.detach(|| {
            // Only the texts are asked (`None` matches nothing); `asked[i]` is text i's place.
            let n = texts.len();
            let mut asked = Vec::with_capacity(n);
            let mut queries = Vec::with_capacity(n);
            for (i, text) in texts.into_iter().enumerate() {
                if let Some(text) = text {
                    asked.push(i);
                    queries.push(Query::text(String::new(), text));
                }
            }
            let mut answers = vec![Vec::new(); n];
            let each = Answerer::new(index, scheme.clone())
                .k(k)
                .answer_each(&mut queries);
            for (i, rows) in asked.into_iter().zip(each) {
                answers[i] = rows
                    .into_iter()
                    .map(|m| {
                        serde_json::json!({
                            "id": m.id,
                            "doc_id": m.doc_id,
                            "hamming": m.hamming,
                            "cluster_id": m.cluster_id,
                        })
                    })
                    .collect();
            }
            answers
        });
        let lists: Vec<Bound<'py, PyAny>> = answers
            .into_iter()
            .map(|a| json_to_python(py, &serde_json::Value::from(a).to_string()))
            .collect::<PyResult<_>>()?;
        PyList::new(py, lists)
    }

    fn __repr__(&self) -> String {
        format!(
            "neardup.Index({:?}, k={})",
            self.path.display().to_string(),
            self.index.k()
        )
    }
}

/// The module `neardup`.
#[pymodule]
fn neardup(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NeardupError", m.py().get_type::<NeardupError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_class::<Index>()?;
    Ok(())
}
