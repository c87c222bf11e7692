import CloudSyncHTTP
import Testing

@Suite struct HTTPFormTests {
    @Test func plusIsASpaceAndPercentEscapesAreBytes() {
        #expect(HTTPForm.decode("a+b%2Bc%20d") == "a b+c d")
        #expect(HTTPForm.decode("caf%C3%A9") == "café")
        #expect(HTTPForm.decode("100%") == "100%", "not percent-encoding: kept as it is")
    }

    @Test func pairsComeInOrderAndAValueMayBeMissing() {
        let pairs = HTTPForm.pairs("q=name+%3D+%27a%27&flag&empty=&q=second&x=a=b")
        #expect(pairs.map(\.name) == ["q", "flag", "empty", "q", "x"])
        #expect(pairs.map(\.value) == ["name = 'a'", "", "", "second", "a=b"])
    }
}
