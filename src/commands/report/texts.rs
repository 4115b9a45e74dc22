//! The texts of a few documents of a run, read back from its inputs.
//!
//! A run does not store texts: `fingerprints/` says where each document is (`source`, the
//! file as the run found it, and `record`, its 0-based number there). The report reads
//! those records again the way the run read them: the run's own command line
//! (`parameters.command_line` in summary.json) is parsed again with `neardup run`'s flags,
//! which gives the text field, the HTML mode and the other document flags, and each file
//! is read through its source kind (as `--write-dedup` does), stopping once every wanted
//! record of the file is found. A text that cannot be had (the file moved, the run was a
//! `neardup search`, a flag this version does not know) is reported as such, never an
//! error of the report.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use clap::Parser;
use neardup_io::input::expand_inputs;
use neardup_io::record::{FieldSpec, Record};
use neardup_io::source::{Payload, SourceRecord};

use crate::commands::run::RunArgs;

/// `neardup run ...` as the run was started, to be parsed again.
#[derive(Parser, Debug)]
#[command(
    name = "neardup",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct RunLine {
    #[command(subcommand)]
    command: RunCommand,
}

#[derive(clap::Subcommand, Debug)]
enum RunCommand {
    Run(Box<RunArgs>),
}

/// The document fields of the run whose command line is `argv`, as `neardup run` built
/// them; or why they cannot be known.
pub fn run_fields(argv: &[String]) -> Result<FieldSpec, String> {
    let line = RunLine::try_parse_from(argv).map_err(|e| {
        let first = e.to_string();
        let first = first.lines().next().unwrap_or_default().to_string();
        format!("the run's command line cannot be read as `neardup run` ({first})")
    })?;
    let RunCommand::Run(args) = line.command;
    let mut fields = args.fields.spec();
    args.documents
        .apply(&mut fields)
        .map_err(|e| format!("the run's document flags: {e:#}"))?;
    Ok(fields)
}

/// Where a document is: its file as the run found it, and its record number there.
pub type Place = (String, u64);

/// The text of every place in `wanted`, or why it could not be read.
pub fn read_texts(
    fields: &Result<FieldSpec, String>,
    wanted: &BTreeSet<Place>,
) -> HashMap<Place, Result<String, String>> {
    let mut by_file: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for (source, record) in wanted {
        by_file.entry(source).or_default().insert(*record);
    }
    let mut texts = HashMap::new();
    for (source, records) in by_file {
        let found = match fields {
            Ok(fields) => read_file(source, &records, fields),
            Err(why) => Err(why.clone()),
        };
        for record in records {
            let text = match &found {
                Ok(map) => map
                    .get(&record)
                    .cloned()
                    .ok_or_else(|| format!("{source} has no record {record} any more")),
                Err(why) => Err(why.clone()),
            };
            texts.insert((source.to_string(), record), text);
        }
    }
    texts
}

/// Reads the records `records` of one input file.
fn read_file(
    source: &str,
    records: &BTreeSet<u64>,
    fields: &FieldSpec,
) -> Result<HashMap<u64, String>, String> {
    if source == "-" || source == "<stdin>" {
        return Err("the run read standard input, which cannot be read again".into());
    }
    if !std::path::Path::new(source).exists() {
        return Err(format!(
            "{source} is not there (the report reads the inputs by the paths the run used, \
             relative to the directory the run was started in)"
        ));
    }
    let files = expand_inputs(&[source.to_string()], false).map_err(|e| e.to_string())?;
    let file = files
        .into_iter()
        .next()
        .ok_or_else(|| format!("{source} is no longer an input neardup reads"))?;
    let kind = file.format.kind();
    let mut out = HashMap::new();
    let mut record = SourceRecord::default();
    for unit in kind.units(&file).map_err(|e| e.to_string())? {
        let mut reader = kind.open(&file, &unit, fields).map_err(|e| e.to_string())?;
        while out.len() < records.len()
            && reader.next_into(&mut record).map_err(|e| e.to_string())?
        {
            if !records.contains(&record.record) {
                continue;
            }
            // Only a line that fails to parse is shown as such; other records that hold
            // no document are passed over.
            let raw = matches!(record.payload, Payload::Raw(_));
            let mut parsed = Record::default();
            let text = match record.payload.document_into(kind, fields, &mut parsed) {
                Some(Ok(())) => parsed.text,
                Some(Err(e)) if raw => format!("(the record cannot be read: {e})"),
                _ => continue,
            };
            out.insert(record.record, text);
        }
        if out.len() == records.len() {
            break;
        }
    }
    Ok(out)
}
