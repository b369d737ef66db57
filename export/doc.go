// Package export writes rtmon's records and summaries for people and other
// tools.
//
//   - RecordWriter writes connections and transactions, PageviewWriter
//     pageviews, each kind to its own file in a directory, as JSON Lines
//     or CSV (Format). Both are pipeline sinks: a write error is kept and
//     returned by Close, so the pipeline never stalls on a full disk.
//   - CSVWriter is the one CSV layout of each record kind (ConnectionCSV,
//     TransactionCSV, PageviewCSV): times and durations in ns, every
//     column, text cells defused against spreadsheet formulas. The record
//     files and the web UI's CSV export both use it.
//   - Summary is the end-of-run report: counts, losses and streaming
//     percentiles (DDSketch, 0.5% relative error) of each response-time
//     part (TransactionParts, PageviewParts).
//   - WriteHAR and HARDir write a pageview as a HAR file that browsers'
//     developer tools open as a waterfall.
package export
