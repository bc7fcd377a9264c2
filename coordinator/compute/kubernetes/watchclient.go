package kubernetes

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// WatchClientConfig derives the caches' client (Config.WatchClient) from
// the driver's: its lists and watches are few and long-lived and must never
// wait behind the rate-limited requests of a deploy storm, so it has no
// rate limiter; and a new leader's lists carry every oce object of every
// namespace, so they travel as they decode fastest. Gzip cost a third of a
// new leader's CPU on its way to current (BenchmarkScale's profile at
// 1,000): inside a cluster the bytes are cheaper than the CPU. Protobuf,
// which the API server speaks for every kind the caches hold, decodes
// several times faster than JSON (BenchmarkDecodeList); JSON stays
// acceptable for a server or proxy that answers only that.
func WatchClientConfig(rc *rest.Config) *rest.Config {
	wc := rest.CopyConfig(rc)
	wc.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	wc.DisableCompression = true
	wc.ContentType = runtime.ContentTypeProtobuf
	wc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return wc
}
