//! Request traces in the FAST'25 format: one JSON object per line with `timestamp`
//! (arrival, ms from the start), `input_length`, `output_length` (tokens) and
//! `hash_ids` (prefix block hashes, 512 tokens per block).

use serde::Deserialize;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TraceRequest {
    /// Arrival, in ms from the start of the trace.
    pub timestamp: f64,
    /// Prompt tokens.
    pub input_length: u64,
    /// Tokens produced.
    pub output_length: u64,
    /// Prefix block hashes of the prompt.
    pub hash_ids: Vec<u64>,
}

/// Reads a trace file; requests sorted by arrival, at most `limit` (0: all).
pub fn load(path: &str, limit: usize) -> Result<Vec<TraceRequest>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
    parse(&text, limit).map_err(|e| format!("{path}: {e}"))
}

/// Parses trace lines (blank lines skipped).
pub fn parse(text: &str, limit: usize) -> Result<Vec<TraceRequest>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: TraceRequest =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        if !r.timestamp.is_finite() || r.timestamp < 0.0 || r.input_length == 0 {
            return Err(format!(
                "line {}: needs a timestamp >= 0 and input_length > 0",
                n + 1
            ));
        }
        out.push(r);
        if limit > 0 && out.len() == limit {
            break;
        }
    }
    out.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_and_sorts_trace_lines() {
        let text = "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [0, 1]}\n\n\
                    {\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n";
        let t = parse(text, 0).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].timestamp, 1.0);
        assert_eq!(t[1].hash_ids, vec![0, 1]);
        assert_eq!(parse(text, 1).unwrap().len(), 1);
        assert!(parse("{\"timestamp\": 1}", 0).is_err());
        assert!(parse(
            "{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}",
            0
        )
        .is_err());
    }
}
