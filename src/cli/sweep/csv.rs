//! runs.csv: one row per run, its grid coordinates and outcome, every field of its
//! `lkcs simulate --json` object flattened into columns, and the paper's formulas.

use super::Record;
use std::collections::BTreeMap;

/// The columns of a JSON object flattened one level (`messages_per_pair.mean`); lists and
/// objects with run-dependent keys (`messages_by_kind`, `violations`, `blocked`) stay JSON.
fn flatten(v: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(obj) = v.as_object() else {
        return out;
    };
    for (key, value) in obj {
        match value {
            serde_json::Value::Object(inner)
                if matches!(
                    key.as_str(),
                    "messages_per_pair" | "remote_messages_per_pair" | "waiting_time"
                ) =>
            {
                for (k2, v2) in inner {
                    out.push((format!("{key}.{k2}"), cell(v2)));
                }
            }
            _ => out.push((key.clone(), cell(value))),
        }
    }
    out
}

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// runs.csv: the grid coordinates, the outcome, every `--json` field, the paper's formulas.
pub(super) fn csv(records: &[&Record]) -> String {
    let mut json_cols: Vec<String> = Vec::new();
    let flat: Vec<BTreeMap<String, String>> = records
        .iter()
        .map(|r| {
            let f = flatten(&r.json);
            for (k, _) in &f {
                if !json_cols.contains(k) {
                    json_cols.push(k.clone());
                }
            }
            f.into_iter().collect()
        })
        .collect();
    let coords = [
        "run", "bounds", "l", "k", "coterie", "mx", "pairs", "think", "outcome", "failure",
    ];
    let tail = [
        "closed_neighbourhood_mean",
        "paper_metric",
        "paper_best",
        "paper_worst",
        "paper_best_formula",
        "paper_worst_formula",
        "measured_over_best",
        "command",
    ];
    let mut out = String::new();
    let header: Vec<String> = coords
        .iter()
        .map(|s| s.to_string())
        .chain(json_cols.iter().cloned())
        .chain(tail.iter().map(|s| s.to_string()))
        .collect();
    out += &header.join(",");
    out.push('\n');
    for (i, (r, f)) in records.iter().zip(&flat).enumerate() {
        let p = &r.point;
        let mut row: Vec<String> = vec![
            (i + 1).to_string(),
            p.bounds.clone(),
            p.l.map(|x| x.to_string()).unwrap_or_default(),
            p.k.map(|x| x.to_string()).unwrap_or_default(),
            p.coterie.clone().unwrap_or_default(),
            p.mx.clone().unwrap_or_default(),
            p.pairs.to_string(),
            p.think.to_string(),
            if r.ok { "passed" } else { "failed" }.to_string(),
            r.failure.clone(),
        ];
        row.extend(
            json_cols
                .iter()
                .map(|c| f.get(c).cloned().unwrap_or_default()),
        );
        row.extend([
            format!("{:.4}", r.closed_mean),
            r.formula.metric.field().to_string(),
            num(r.formula.best),
            num(r.formula.worst),
            r.formula.best_text.to_string(),
            r.formula.worst_text.to_string(),
            num(r.formula.best.filter(|b| *b > 0.0).map(|b| r.measured / b)),
            p.command(),
        ]);
        let row: Vec<String> = row.iter().map(|c| csv_field(c)).collect();
        out += &row.join(",");
        out.push('\n');
    }
    out
}
