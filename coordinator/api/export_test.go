package api

// HeldOf exposes heldOf to the external tests.
var HeldOf = heldOf
