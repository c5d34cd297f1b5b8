// Package envoyrls serves Envoy's rate limit service.
package envoyrls
