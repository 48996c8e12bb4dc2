//! A link record names its workspace, resolved with the link before anything is written (no
//! process-wide table read behind the write's back): a workspace that cannot be named refuses
//! the write, rather than a record that answers on no host or on another workspace's.

use super::*;
use reqwest::Method;
use shortlink_core::projection::Slugs;
use shortlink_model::WorkspaceId;

#[tokio::test]
async fn a_deleted_workspace_cannot_be_named_in_a_record() {
    let (app, operator) = app_with_workspaces(&["brand-a"]).await;
    let id = WorkspaceId::from_db(
        (app.db)
            .scalar("SELECT id FROM workspaces WHERE slug = 'brand-a'")
            .await,
    );
    let named = app.state.links.record_workspace(id).await.unwrap();
    assert_eq!(named.slug().as_str(), "brand-a");
    // A job's own cache, loaded from the database, knows it too.
    let storage = app.storage().await;
    let loaded = Slugs::load(storage.as_ref()).await.unwrap();
    assert_eq!(loaded.known_record_workspace(id), Some(named));

    let deleted = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200, "{:?}", deleted.text().await);
    // A job's group planned after the delete stops as the delete's, not as an internal error.
    assert!(
        matches!(
            app.state.links.record_workspace(id).await,
            Err(shortlink_core::service::ServiceError::Stopped(
                shortlink_core::service::Stop::WorkspaceDeleted
            ))
        ),
        "the service still names a deleted workspace"
    );
    assert!(Slugs::default()
        .record_workspace(storage.as_ref(), id)
        .await
        .is_err());
    let loaded = Slugs::load(storage.as_ref()).await.unwrap();
    assert_eq!(loaded.known_record_workspace(id), None);
    assert_eq!(
        loaded.known_record_workspace(WorkspaceId::DEFAULT),
        Some(shortlink_core::projection::RecordWorkspace::DEFAULT)
    );
}
