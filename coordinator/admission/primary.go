package admission

import "oce.dev/oce/shared/modelref"

// PrimaryModel is the primary model an admitted document selects and its
// provider's settings, for the coordinator's pre-cutover credential check.
type PrimaryModel struct {
	Ref      modelref.Ref
	Provider Provider // models.providers.<provider>, zero when absent
	// ProviderSet reports whether models.providers.<provider> exists.
	ProviderSet bool
}

// Primary resolves the primary model of a document the way admission does;
// ok is false when the document selects none.
func Primary(doc []byte) (PrimaryModel, bool, error) {
	d, err := DecodeDocument(doc)
	if err != nil {
		return PrimaryModel{}, false, err
	}
	res, err := resolveHarness(d)
	if err != nil || !res.HasModel {
		return PrimaryModel{}, false, err
	}
	p, set := d.Providers[res.Primary.Provider]
	return PrimaryModel{Ref: res.Primary, Provider: p, ProviderSet: set}, true, nil
}
