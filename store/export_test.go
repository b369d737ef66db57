package store

// SetWriterRefreshesRollups lets tests play a writer that stops between
// an insert and its rollup recompute.
func SetWriterRefreshesRollups(on bool) { writerRefreshesRollups = on }
