package pgstore

// WithoutListener keeps s's revision listener from starting (a test of what a store's
// own writes and reads do to its view, with no notification racing them).
func WithoutListener(s *Store) { s.rev.start.Do(func() {}) }
