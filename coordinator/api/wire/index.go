package wire

// Index is the answer of GET /v1/index: the applied index of the answering
// member's state. With ?index=N&wait=D it is a blocking query for change.
type Index struct {
	Index uint64 `json:"index"`
}
