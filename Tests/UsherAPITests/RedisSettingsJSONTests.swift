import RedisClient
import Testing
import UsherCore

@testable import UsherAPI

/// The config layer's reading of the `redis` block (`RedisSettings.init(json:)`).
@Suite struct RedisSettingsJSONTests {
    @Test func readsJSONWithDefaults() throws {
        let settings = try RedisSettings(json: try JSONValue.parse(#"{"url": "redis://h:1/0"}"#))
        #expect(settings == RedisSettings(url: "redis://h:1/0"))
        #expect(settings.keyPrefix == "usher:")
        let full = try RedisSettings(
            json: try JSONValue.parse(
                #"{"url": "redis://h", "password_env": "REDIS_PW", "connect_timeout_seconds": 0.5, "command_timeout_seconds": 3, "key_prefix": "x:"}"#
            ))
        #expect(
            full
                == RedisSettings(
                    url: "redis://h", passwordEnv: "REDIS_PW", connectTimeoutSeconds: 0.5, commandTimeoutSeconds: 3,
                    keyPrefix: "x:"))
        #expect(settings.metricsTimeoutSeconds == 0.25)
        let metrics = try RedisSettings(
            json: try JSONValue.parse(#"{"url": "redis://h", "metrics_timeout_seconds": 1}"#))
        #expect(metrics.metricsTimeoutSeconds == 1)
    }

    @Test func clusterIsReadAndNeedsDatabaseZero() throws {
        #expect(try RedisSettings(json: try JSONValue.parse(#"{"url": "redis://h"}"#)).cluster == false)
        let cluster = try RedisSettings(json: try JSONValue.parse(#"{"url": "redis://h:7000/0", "cluster": true}"#))
        #expect(cluster == RedisSettings(url: "redis://h:7000/0", cluster: true))
        #expect(RedisSettings.clusterProblem(url: "redis://h:7000") == nil)
        #expect(RedisSettings.clusterProblem(url: "redis://h:7000/1")?.contains("database 1") == true)
    }

    @Test func jsonErrorsNameTheField() throws {
        let cases: [(String, String)] = [
            (#"{}"#, "redis.url"),
            (#"{"url": "rediss://h"}"#, "redis.url"),
            (#"{"url": "redis://h", "command_timeout_seconds": 0}"#, "redis.command_timeout_seconds"),
            (#"{"url": "redis://h", "connect_timeout_seconds": "1"}"#, "redis.connect_timeout_seconds"),
            (#"{"url": "redis://h", "pasword_env": "X"}"#, "redis.pasword_env"),
            (#"{"url": "redis://h/2", "cluster": true}"#, "redis.cluster"),
            (#"{"url": "redis://h", "cluster": "yes"}"#, "redis.cluster"),
            (#"{"url": "redis://h", "metrics_timeout_seconds": 11}"#, "redis.metrics_timeout_seconds"),
            (#"{"url": "redis://h", "metrics_timeout_seconds": 0}"#, "redis.metrics_timeout_seconds"),
        ]
        for (text, field) in cases {
            let value = try JSONValue.parse(text)
            #expect(throws: FieldError.self) { try RedisSettings(json: value) }
            do { _ = try RedisSettings(json: value) } catch { #expect(error.field == field, "\(text)") }
        }
    }
}
