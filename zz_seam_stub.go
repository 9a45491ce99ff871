package switchboard

// TEMPORARY until the seam branch lands (see /work/plan/seam-api.md).
const TransportHosted Transport = "hosted"
