package store

// CaptureSessions counts a capture's sessions by how they entered and left
// it: a capture started on a proxy that was already relaying holds
// sessions that were open at its start (their synthetic records,
// FlagOpenAtStart) and sessions still open at its stop (their synthetic
// end, FlagOpenAtStop). Its JSON field names are part of the run format
// (RunMeta.CaptureSessions).
type CaptureSessions struct {
	// OpenAtStart: sessions that entered the capture through a synthetic
	// connect; InTransaction those of them that were inside a
	// transaction then (a synthetic START TRANSACTION, FlagBeforeStart).
	OpenAtStart   int64 `json:"open_at_start"`
	InTransaction int64 `json:"open_at_start_in_transaction"`
	// Connected: sessions whose connect the capture holds as sent.
	Connected int64 `json:"connected_during"`
	// Ended: sessions that quit or disconnected during the capture;
	// OpenAtStop those still open at its stop (a synthetic end).
	Ended      int64 `json:"quit_or_disconnected"`
	OpenAtStop int64 `json:"open_at_stop"`
}

// Add counts rec, one of a capture's records in order. The writes that
// bypassed the proxy, applied as a session of their own
// (BypassedSessionBase), are no client's session: not counted.
func (c *CaptureSessions) Add(rec *Record) {
	switch {
	case rec.Session >= BypassedSessionBase:
	case rec.Kind == KindConnect && rec.Flags&FlagOpenAtStart != 0:
		c.OpenAtStart++
	case rec.Kind == KindConnect:
		c.Connected++
	case rec.Kind == KindQuery && rec.Flags&(FlagOpenAtStart|FlagBeforeStart) == FlagOpenAtStart|FlagBeforeStart:
		c.InTransaction++ // the synthetic START TRANSACTION of a session open at the start
	case rec.Kind == KindQuit && rec.Flags&FlagOpenAtStop != 0:
		c.OpenAtStop++
	case rec.Kind == KindQuit:
		c.Ended++
	}
}

// Joined reports whether the capture began or ended on a running proxy
// with sessions open.
func (c *CaptureSessions) Joined() bool { return c != nil && (c.OpenAtStart > 0 || c.OpenAtStop > 0) }
